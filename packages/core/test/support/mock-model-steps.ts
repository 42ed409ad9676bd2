/**
 * Steps for the AI SDK's `MockLanguageModelV4` (from `ai/test`), the stand-in for a hosted model:
 * a step that calls tools, and a step that answers with text.
 */
import type { LanguageModelV4GenerateResult } from "@ai-sdk/provider";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

export { usage as mockUsage };

/** A model step that calls each `[toolCallId, toolName, input]`; input is sent as JSON text unless already a string. */
export function toolCallsStep(
  ...calls: readonly (readonly [string, string, unknown])[]
): LanguageModelV4GenerateResult {
  return {
    content: calls.map(([toolCallId, toolName, input]) => ({
      type: "tool-call" as const,
      toolCallId,
      toolName,
      input: typeof input === "string" ? input : JSON.stringify(input),
    })),
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

export function textStep(text: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}
