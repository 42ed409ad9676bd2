import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { generateText, stepCountIs, streamText } from "ai";
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { textStep, toolCallsStep, mockUsage as usage } from "../../test/support/mock-model-steps.ts";
import { controlFlowBrand } from "../errors/control-flow.ts";
import { withoutDialect } from "../schema/schema.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { isAiSdkToolFailure, toAiSdkTools } from "./to-ai-sdk-tools.ts";

// The hosted model is the only mock here: the AI SDK's own MockLanguageModelV4 scripts the steps.

/** The tool messages the model received in a later step's prompt. */
function toolResultsIn(call: LanguageModelV4CallOptions | undefined) {
  return (call?.prompt ?? []).flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : [],
  );
}

const seen: { callId: string; signal: boolean }[] = [];
const weather = defineTool({
  name: "weather.current",
  description: "Current temperature of a city.",
  input: z.object({ city: z.string().min(1) }),
  output: z.object({ city: z.string(), celsius: z.number() }),
  execute: ({ city }, context) => {
    seen.push({ callId: context.callId, signal: context.signal instanceof AbortSignal });
    if (city === "Atlantis") throw new Error("no station there");
    return { city, celsius: 21 };
  },
});

describe("toAiSdkTools: definitions and the generateText loop", () => {
  it("keys tools by model-safe names with the derived JSON Schema", async () => {
    const tools = toAiSdkTools(createToolSet([weather]));
    // The paging tool of answers cut to the budget comes beside the set's tools (ADR 0532).
    assert.deepEqual(Object.keys(tools), ["weather__current", "tackle_result_page"]);
    const definition = tools.weather__current;
    assert.ok(definition !== undefined);
    const schema = await (definition.inputSchema as { jsonSchema: unknown }).jsonSchema;
    assert.deepEqual(schema, withoutDialect(weather.inputJsonSchema));
  });

  it("runs in a generateText tool loop: the tool executes and its result reaches the second step", async () => {
    seen.length = 0;
    const model = new MockLanguageModelV4({
      doGenerate: [
        toolCallsStep(["call-izmir", "weather__current", { city: "Izmir" }]),
        textStep("21 °C in Izmir"),
      ],
    });
    const result = await generateText({
      model,
      tools: toAiSdkTools(createToolSet([weather])),
      prompt: "How warm is Izmir?",
      stopWhen: stepCountIs(3),
    });
    assert.equal(result.text, "21 °C in Izmir");
    assert.equal(result.steps.length, 2);
    assert.deepEqual(seen, [{ callId: "call-izmir", signal: true }]);
    const [toolResult] = toolResultsIn(model.doGenerateCalls[1]);
    assert.equal(toolResult?.toolCallId, "call-izmir");
    assert.deepEqual(toolResult?.output, { type: "json", value: { city: "Izmir", celsius: 21 } });
    // The model was offered the tool under its model-safe name.
    const offered = model.doGenerateCalls[0]?.tools?.map((tool) => tool.name);
    assert.deepEqual(offered, ["weather__current", "tackle_result_page"]);
  });

  it("hands invalid input and failures back to the model as error data it can act on", async () => {
    const model = new MockLanguageModelV4({
      doGenerate: [
        toolCallsStep(
          ["call-bad", "weather__current", { city: "" }],
          ["call-fail", "weather__current", { city: "Atlantis" }],
        ),
        textStep("sorry"),
      ],
    });
    const result = await generateText({
      model,
      tools: toAiSdkTools(createToolSet([weather])),
      prompt: "?",
      stopWhen: stepCountIs(3),
    });
    assert.equal(result.text, "sorry");
    const outputs = toolResultsIn(model.doGenerateCalls[1]).map((part) => part.output);
    assert.equal(outputs.length, 2);
    const [invalid, failed] = outputs as {
      type: string;
      value: { code: string; data?: { issues: { path: unknown[] }[] } };
    }[];
    assert.equal(invalid?.type, "error-json");
    assert.equal(invalid?.value.code, "invalid_input");
    assert.deepEqual(
      invalid?.value.data?.issues.map((issue) => issue.path),
      [["city"]],
    );
    assert.equal(failed?.type, "error-json");
    assert.equal(failed?.value.code, "tool_failed");
    assert.match(JSON.stringify(failed?.value), /no station there/);
    assert.doesNotMatch(JSON.stringify(outputs), /at .*\.ts:\d+/);
    // The caller sees the same failure as data on the step's tool results.
    assert.ok(result.steps[0]?.toolResults.every((part) => isAiSdkToolFailure(part.output)));
  });
});

describe("toAiSdkTools: streaming, signals and control flow", () => {
  it("runs in a streamText tool loop", async () => {
    seen.length = 0;
    const streamSteps: LanguageModelV4StreamPart[][] = [
      [
        { type: "stream-start", warnings: [] },
        {
          type: "tool-call",
          toolCallId: "call-stream",
          toolName: "weather__current",
          input: '{"city":"Ankara"}',
        },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
      ],
      [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "21 °C in Ankara" },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
      ],
    ];
    const model = new MockLanguageModelV4({
      doStream: streamSteps.map((parts) => ({ stream: convertArrayToReadableStream(parts) })),
    });
    const result = streamText({
      model,
      tools: toAiSdkTools(createToolSet([weather])),
      prompt: "How warm is Ankara?",
      stopWhen: stepCountIs(3),
    });
    assert.equal(await result.text, "21 °C in Ankara");
    assert.deepEqual(seen, [{ callId: "call-stream", signal: true }]);
    const [toolResult] = toolResultsIn(model.doStreamCalls[1]);
    assert.deepEqual(toolResult?.output, { type: "json", value: { city: "Ankara", celsius: 21 } });
  });

  it("passes the AI SDK's abort signal into the call", async () => {
    let aborted = false;
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const hang = defineTool({
      name: "hang",
      description: "Never finishes by itself.",
      input: z.object({}),
      execute: (_input, context) =>
        new Promise((resolve) => {
          context.signal.addEventListener("abort", () => {
            aborted = true;
            resolve("stopped");
          });
          started();
        }),
    });
    const tools = toAiSdkTools(createToolSet([hang]));
    const controller = new AbortController();
    const call = tools.hang?.execute?.(
      {},
      { toolCallId: "c", messages: [], abortSignal: controller.signal, context: {} },
    );
    await running;
    controller.abort();
    const output = await call;
    assert.equal(aborted, true);
    assert.ok(isAiSdkToolFailure(output));
    assert.equal(output.error.code, "aborted");
  });

  it("rethrows a control-flow throw untouched", async () => {
    const pause = Object.assign(new Error("paused"), { [controlFlowBrand]: true });
    const pausing = defineTool({
      name: "pausing",
      description: "Pauses for a human.",
      input: z.object({}),
      execute: () => {
        throw pause;
      },
    });
    const tools = toAiSdkTools(createToolSet([pausing]));
    await assert.rejects(
      Promise.resolve(tools.pausing?.execute?.({}, { toolCallId: "c", messages: [], context: {} })),
      (error) => error === pause,
    );
  });
});
