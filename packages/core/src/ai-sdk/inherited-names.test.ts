import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { textStep, toolCallsStep } from "../../test/support/mock-model-steps.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { toAiSdkTools } from "./to-ai-sdk-tools.ts";

// The hosted model is the only stand-in: the AI SDK's own MockLanguageModelV4, a scripted model.

const inherited = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "isPrototypeOf"];

function named(name: string) {
  return defineTool({
    name,
    description: `The tool ${name}.`,
    input: z.object({ note: z.string().optional() }),
    execute: () => ({ ran: name }),
  });
}

function toolResultsIn(call: LanguageModelV4CallOptions | undefined) {
  return (call?.prompt ?? []).flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : [],
  );
}

describe("toAiSdkTools: tools named like Object.prototype's properties (ADR 0546)", () => {
  it("offers and runs a tool named __proto__ in a generateText loop; an unknown inherited name runs nothing", async () => {
    const model = new MockLanguageModelV4({
      doGenerate: [
        toolCallsStep(
          ["call-proto", "__proto__", {}],
          ["call-constructor", "constructor", {}],
          ["call-tostring", "toString", {}],
        ),
        textStep("done"),
      ],
    });
    const tools = toAiSdkTools(createToolSet([named("__proto__"), named("constructor")]));
    assert.equal(Object.getPrototypeOf(tools), Object.prototype);
    const result = await generateText({ model, tools, prompt: "go", stopWhen: stepCountIs(3) });
    assert.equal(result.text, "done");
    const offered = model.doGenerateCalls[0]?.tools?.map((tool) => tool.name);
    assert.deepEqual(offered, ["__proto__", "constructor", "tackle_result_page"]);
    const answers = Object.fromEntries(
      toolResultsIn(model.doGenerateCalls[1]).map((part) => [part.toolCallId, part.output]),
    );
    assert.deepEqual(answers["call-proto"], { type: "json", value: { ran: "__proto__" } });
    assert.deepEqual(answers["call-constructor"], { type: "json", value: { ran: "constructor" } });
    // No tool of that name: the AI SDK answers the model an error, and nothing of Object's runs.
    assert.equal((answers["call-tostring"] as { type?: string } | undefined)?.type, "error-text");
    assert.match(JSON.stringify(answers["call-tostring"]), /toString/);
  });

  it("keys every tool under its model-safe name, for random sets of inherited and ordinary names", () => {
    let seed = 0x2f6e2b1;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pool = [...inherited, "orders.get", "a-b", "x".repeat(128), "tackle.result", "__defineGetter__"];
    for (let round = 0; round < 500; round += 1) {
      const names = pool.filter(() => random() < 0.5);
      const toolset = createToolSet(names.map(named));
      const tools = toAiSdkTools(toolset, round % 2 === 0 ? {} : { resultBudget: false });
      const expected = names.map((name) => toolset.llmName(name));
      if (round % 2 === 0) expected.push("tackle_result_page");
      assert.deepEqual(Object.keys(tools), expected);
      for (const key of expected) assert.ok(Object.hasOwn(tools, key), key);
      assert.equal(Object.getPrototypeOf(tools), Object.prototype);
    }
  });
});
