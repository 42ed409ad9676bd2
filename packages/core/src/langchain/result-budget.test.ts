/**
 * What a model reads of a LangChain tool's answer fits a token budget (ADR 0532): a call from a model
 * (a `ToolCall`) past the budget is answered with its first part and a cursor, the whole output as the
 * artifact; `tackle_result_page` reads every other part once, in order, each within the budget
 * (counted with the tokenizer itself). A program's call with plain arguments gets the whole output.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolMessage } from "@langchain/core/messages";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { z } from "zod";
import { clashingTools, cursorIn, partText } from "../../test/support/long-answers.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { toLangChainTools } from "./to-langchain-tools.ts";

const budget = 2_000;
const rows = Array.from({ length: 4_000 }, (_, id) => ({ id, name: `row ${id}` }));
const reports = createToolSet([
  defineTool({
    name: "report.rows",
    description: "Many rows.",
    input: z.object({}),
    execute: () => ({ rows }),
  }),
]);
const toolCall = (id: string, name: string, args: Record<string, unknown>) => ({
  id,
  name,
  args,
  type: "tool_call" as const,
});

describe("toLangChainTools: a model reads answers within a token budget", () => {
  it("cut, read on by cursor, joined back; the artifact keeps the whole output", async () => {
    const [rowsTool, pager] = toLangChainTools(reports, { resultBudget: budget });
    assert.equal(pager?.name, "tackle_result_page");
    const first = (await rowsTool!.invoke(toolCall("c1", "report__rows", {}))) as ToolMessage;
    assert.ok(first instanceof ToolMessage);
    assert.deepEqual(first.artifact, { rows });
    const parts = [String(first.content)];
    assert.match(parts[0]!, /Answer cut to fit the budget of 2000 tokens/);
    for (
      let cursor = cursorIn(parts.at(-1)!), step = 2;
      cursor !== undefined;
      cursor = cursorIn(parts.at(-1)!), step += 1
    ) {
      const next = (await pager!.invoke(
        toolCall(`c${step}`, "tackle_result_page", { cursor }),
      )) as ToolMessage;
      assert.notEqual(next.status, "error");
      parts.push(String(next.content));
    }
    assert.ok(parts.length > 5, `only ${parts.length} parts`);
    for (const part of parts) assert.ok(countTokens(part) <= budget, `a part of ${countTokens(part)} tokens`);
    assert.match(parts.at(-1)!, /This is the last part/);
    assert.deepEqual(JSON.parse(parts.map(partText).join("")), { rows });
  });

  it("a program's call gets the whole output; resultBudget: false adds no paging tool", async () => {
    const [rowsTool] = toLangChainTools(reports);
    assert.deepEqual(await rowsTool!.invoke({}), { rows });
    const whole = toLangChainTools(reports, { resultBudget: false });
    assert.deepEqual(
      whole.map((tool) => tool.name),
      ["report__rows"],
    );
    const message = (await whole[0]!.invoke(toolCall("w", "report__rows", {}))) as ToolMessage;
    assert.deepEqual(JSON.parse(String(message.content)), { rows });
  });

  it("an unknown cursor is a coded error the model reads", async () => {
    const [, pager] = toLangChainTools(reports);
    const answer = (await pager!.invoke(
      toolCall("u", "tackle_result_page", { cursor: "nope" }),
    )) as ToolMessage;
    assert.equal(answer.status, "error");
    assert.equal(JSON.parse(String(answer.content)).error.code, "not_found");
  });

  it("a tool named like the paging tool is refused, naming it", () => {
    const clash = clashingTools();
    assert.throws(() => toLangChainTools(clash), {
      code: "invalid_tool_definition",
      message: /tackle_result_page/,
    });
    assert.doesNotThrow(() => toLangChainTools(clash, { resultBudget: false }));
  });
});
