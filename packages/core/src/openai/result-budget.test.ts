/**
 * What a model reads of a tool's answer through the OpenAI helpers fits a token budget (ADR 0532):
 * a long answer comes as its first part and a cursor, and `tackle_result_page` calls read every other
 * part once, in order, each within the budget (counted with the tokenizer itself). The model is the
 * stand-in: its tool calls are written here as the wire would carry them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { clashingTools, cursorIn, longText, partText, reportTools } from "../../test/support/long-answers.ts";
import { runChatToolCalls } from "./run-chat-tool-calls.ts";
import { runResponseToolCalls } from "./run-response-tool-calls.ts";
import { toOpenAIChatTools, toOpenAIResponseTools } from "./to-openai-tools.ts";

const budget = 2_000;
const reports = reportTools([]);

/** One chat tool call as the model sends it. */
const chatCall = (id: string, name: string, args: unknown) => ({
  tool_calls: [{ id, type: "function" as const, function: { name, arguments: JSON.stringify(args) } }],
});

describe("the OpenAI helpers answer within a token budget", () => {
  it("chat completions: cut, read on by cursor, joined back", async () => {
    const options = { resultBudget: budget };
    const names = toOpenAIChatTools(reports, options).map((tool) => tool.function.name);
    assert.deepEqual(names, ["report__text", "report__rows", "report__short", "tackle_result_page"]);
    let [answer] = await runChatToolCalls(reports, chatCall("c1", "report__text", {}), options);
    let text = String(answer?.content);
    assert.match(text, /Answer cut to fit the budget of 2000 tokens/);
    const parts = [text];
    for (let cursor = cursorIn(text), step = 2; cursor !== undefined; cursor = cursorIn(text), step += 1) {
      [answer] = await runChatToolCalls(
        reports,
        chatCall(`c${step}`, "tackle_result_page", { cursor }),
        options,
      );
      text = String(answer?.content);
      parts.push(text);
    }
    assert.ok(parts.length > 10, `only ${parts.length} parts`);
    for (const part of parts) assert.ok(countTokens(part) <= budget, `a part of ${countTokens(part)} tokens`);
    assert.match(parts.at(-1)!, /This is the last part/);
    assert.equal(parts.map(partText).join(""), longText);
  });

  it("responses: the same, as function_call_output items", async () => {
    const names = toOpenAIResponseTools(reports).map((tool) => tool.name);
    assert.deepEqual(names, ["report__text", "report__rows", "report__short", "tackle_result_page"]);
    const call = (name: string, args: unknown) => [
      { type: "function_call" as const, call_id: "r1", name, arguments: JSON.stringify(args), id: "fc" },
    ];
    const [first] = await runResponseToolCalls(reports, call("report__text", {}));
    assert.match(String(first?.output), /budget of 8000 tokens/);
    const [second] = await runResponseToolCalls(
      reports,
      call("tackle_result_page", { cursor: cursorIn(String(first?.output)) }),
    );
    assert.match(String(second?.output), /^Line .*\[Part 2 of a cut answer/s);
  });

  it("a short answer as it was; resultBudget: false answers whole and lists no paging tool", async () => {
    const [short] = await runChatToolCalls(reports, chatCall("s", "report__short", {}));
    assert.equal(short?.content, '{"n":1}');
    const whole = { resultBudget: false } as const;
    assert.deepEqual(
      toOpenAIChatTools(reports, whole).map((tool) => tool.function.name),
      ["report__text", "report__rows", "report__short"],
    );
    const [long] = await runChatToolCalls(reports, chatCall("w", "report__text", {}), whole);
    assert.equal(long?.content, longText);
  });

  it("a bad cursor or bad arguments to the paging tool answer a coded error", async () => {
    const [unknown] = await runChatToolCalls(
      reports,
      chatCall("u", "tackle_result_page", { cursor: "nope" }),
    );
    assert.equal(JSON.parse(String(unknown?.content)).error.code, "not_found");
    const [bad] = await runChatToolCalls(reports, {
      tool_calls: [
        { id: "b", type: "function", function: { name: "tackle_result_page", arguments: "{oops" } },
      ],
    });
    assert.equal(JSON.parse(String(bad?.content)).error.code, "invalid_input");
  });

  it("a tool named like the paging tool is refused, naming it", () => {
    const clash = clashingTools();
    assert.throws(() => toOpenAIChatTools(clash), {
      code: "invalid_tool_definition",
      message: /tackle_result_page/,
    });
    assert.doesNotThrow(() => toOpenAIChatTools(clash, { resultBudget: false }));
  });
});
