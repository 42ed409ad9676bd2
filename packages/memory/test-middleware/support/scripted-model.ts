/**
 * Scripted stand-ins for a hosted model, built on the AI SDK's own `MockLanguageModelV4`: the
 * answer is a function of the prompt, so tests can see what the middleware put in it.
 */
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";

export const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

export function textResult(text: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}

export function toolCallResult(
  toolName: string,
  input: unknown,
  toolCallId = "call-1",
): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

export function textStream(text: string): ReadableStream<LanguageModelV4StreamPart> {
  return convertArrayToReadableStream<LanguageModelV4StreamPart>([
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t1" },
    ...text.split(/(?<= )/).map((delta) => ({ type: "text-delta" as const, id: "t1", delta })),
    { type: "text-end", id: "t1" },
    { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
  ]);
}

/** The system messages the model received. */
export function systemText(call: LanguageModelV4CallOptions | undefined): string {
  return (call?.prompt ?? [])
    .flatMap((message) => (message.role === "system" ? [message.content] : []))
    .join("\n");
}

/** The text of the last user message the model received. */
export function lastUserText(call: LanguageModelV4CallOptions): string {
  const user = call.prompt.findLast((message) => message.role === "user");
  return user?.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("") ?? "";
}

/** A model whose answer is computed from each call's options. */
export function scriptedModel(answer: (call: LanguageModelV4CallOptions) => string | Promise<string>) {
  return new MockLanguageModelV4({
    doGenerate: async (call) => textResult(await answer(call)),
    doStream: async (call) => ({ stream: textStream(await answer(call)) }),
  });
}
