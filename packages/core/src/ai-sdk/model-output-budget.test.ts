/**
 * What a model reads of an AI SDK tool's answer fits a token budget (ADR 0532), in a real
 * `generateText` loop; the hosted model is the only stand-in (the AI SDK's `MockLanguageModelV4`, a
 * scripted model that reads each cut answer's cursor and asks for the next part). Tokens are counted
 * here with the tokenizer itself.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { z } from "zod";
import { clashingTools, longText, manyRows, reportTools } from "../../test/support/long-answers.ts";
import { textStep, toolCallsStep } from "../../test/support/mock-model-steps.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { toAiSdkTools } from "./to-ai-sdk-tools.ts";

const budget = 2_000;
const rows = manyRows(1_200);
const reports = reportTools(rows);

type Part = { type: string; text?: string };
interface SeenOutput {
  readonly type: string;
  readonly value: unknown;
}

/** The last tool result in a step's prompt, as the model reads it. */
function lastToolOutput(call: LanguageModelV4CallOptions): SeenOutput | undefined {
  const results = call.prompt.flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : [],
  );
  return results.at(-1)?.output as SeenOutput | undefined;
}

/** A scripted model: calls `tool`, then follows every cursor it reads, then answers. */
function pagingModel(tool: string) {
  const seen: SeenOutput[] = [];
  let step = 0;
  const model = new MockLanguageModelV4({
    doGenerate: async (call): Promise<LanguageModelV4GenerateResult> => {
      step += 1;
      if (step === 1) return toolCallsStep(["call-1", tool, {}]);
      const output = lastToolOutput(call)!;
      seen.push(output);
      const parts = output.type === "content" ? (output.value as Part[]) : [];
      const cursor = /tackle_result_page \{"cursor":"([^"]+)"\}/.exec(parts.at(-1)?.text ?? "")?.[1];
      return cursor === undefined
        ? textStep("done")
        : toolCallsStep([`call-${step}`, "tackle_result_page", { cursor }]);
    },
  });
  return { model, seen };
}

/** Every part's text, summaries left out, joined; each part within the budget. */
function joined(seen: readonly SeenOutput[]): string {
  assert.ok(seen.length > 3, `only ${seen.length} parts`);
  let text = "";
  for (const output of seen) {
    assert.equal(output.type, "content");
    const parts = output.value as Part[];
    const tokens = parts.reduce((sum, part) => sum + countTokens(part.text ?? ""), 0);
    assert.ok(tokens <= budget, `a part of ${tokens} tokens, over ${budget}`);
    text += parts
      .slice(0, -1)
      .map((part) => part.text ?? "")
      .join("");
  }
  assert.match((seen.at(-1)!.value as Part[]).at(-1)?.text ?? "", /This is the last part/);
  return text;
}

describe("toAiSdkTools: the model reads answers within a token budget", () => {
  for (const [tool, whole, text] of [
    ["report__text", longText, longText],
    ["report__rows", { rows }, JSON.stringify({ rows })],
  ] as const) {
    it(`${tool}: cut, read on part by part, joined back; the program keeps the whole output`, async () => {
      const { model, seen } = pagingModel(tool);
      const result = await generateText({
        model,
        tools: toAiSdkTools(reports, { resultBudget: budget }),
        prompt: "Read the report.",
        stopWhen: stepCountIs(100),
      });
      assert.equal(result.text, "done");
      assert.deepEqual(result.steps[0]?.toolResults[0]?.output, whole);
      assert.match(
        (seen[0]!.value as Part[]).at(-1)?.text ?? "",
        /Answer cut to fit the budget of 2000 tokens/,
      );
      assert.equal(joined(seen), text);
    });
  }

  it("a short answer is read as it is; resultBudget: false reads a long one whole, with no paging tool", async () => {
    const short = pagingModel("report__short");
    await generateText({
      model: short.model,
      tools: toAiSdkTools(reports),
      prompt: "?",
      stopWhen: stepCountIs(5),
    });
    assert.deepEqual(short.seen, [{ type: "json", value: { n: 1 } }]);

    const whole = pagingModel("report__text");
    const tools = toAiSdkTools(reports, { resultBudget: false });
    assert.equal("tackle_result_page" in tools, false);
    await generateText({ model: whole.model, tools, prompt: "?", stopWhen: stepCountIs(5) });
    assert.deepEqual(whole.seen, [{ type: "text", value: longText }]);
  });

  it("by default 8,000 tokens; a cursor another set of tools made is unknown here", async () => {
    const { model, seen } = pagingModel("report__text");
    await generateText({ model, tools: toAiSdkTools(reports), prompt: "?", stopWhen: stepCountIs(2) });
    const first = seen[0]?.value as Part[];
    assert.match(first.at(-1)?.text ?? "", /budget of 8000 tokens/);
    const cursor = /"cursor":"([^"]+)"/.exec(first.at(-1)?.text ?? "")?.[1] ?? "";
    assert.notEqual(cursor, "");
    const other = toAiSdkTools(reports);
    const answer = await other.tackle_result_page?.execute?.({ cursor }, {
      toolCallId: "x",
      messages: [],
    } as never);
    assert.equal((answer as { isError?: boolean }).isError, true);
  });

  it("a call id used again (a provider numbering calls afresh) is answered with its own output", async () => {
    let call = 0;
    const counter = createToolSet([
      defineTool({
        name: "count",
        description: "Counts its calls.",
        input: z.object({}),
        execute: () => {
          call += 1;
          return `${call}${longText}`;
        },
      }),
    ]);
    const tools = toAiSdkTools(counter, { resultBudget: budget });
    for (const expected of ["1Line 0", "2Line 0"]) {
      const { model, seen } = pagingModel("count");
      await generateText({ model, tools, prompt: "?", stopWhen: stepCountIs(2) });
      assert.ok(((seen[0]!.value as Part[])[0]?.text ?? "").startsWith(expected));
    }
  });

  it("asked again for one call's output, the same part and cursor; another call, a cursor of its own", async () => {
    const tools = toAiSdkTools(reports, { resultBudget: budget });
    for (const [name, output] of [
      ["report__text", longText],
      ["report__rows", { rows }],
    ] as const) {
      const modelOutput = (toolCallId: string) =>
        tools[name]?.toModelOutput?.({ toolCallId, input: {}, output } as never);
      const first = await modelOutput("call-a");
      assert.deepEqual(await modelOutput("call-a"), first);
      assert.notDeepEqual(await modelOutput("call-b"), first);
    }
  });

  it("writes an object answer to JSON once, to check it and to measure it", async () => {
    // A `toJSON` that counts: JSON is written once for each answer the model reads, long or short.
    let written = 0;
    const counted = (value: unknown) => ({
      toJSON: () => {
        written += 1;
        return value;
      },
    });
    const tools = toAiSdkTools(reports, { resultBudget: budget });
    const modelOutput = (toolCallId: string, output: unknown) =>
      tools.report__rows?.toModelOutput?.({ toolCallId, input: {}, output } as never);
    const long = await modelOutput("call-long", counted({ rows }));
    assert.equal(written, 1);
    assert.equal((long as SeenOutput).type, "content");
    assert.match(((long as SeenOutput).value as Part[]).at(-1)?.text ?? "", /tackle_result_page/);
    const short = await modelOutput("call-short", counted({ n: 1 }));
    assert.equal(written, 2);
    assert.equal((short as SeenOutput).type, "json");
  });

  it("a tool named like the paging tool is refused, naming it", () => {
    const clash = clashingTools();
    assert.throws(() => toAiSdkTools(clash), {
      code: "invalid_tool_definition",
      message: /tackle_result_page/,
    });
    assert.doesNotThrow(() => toAiSdkTools(clash, { resultBudget: false }));
  });
});
