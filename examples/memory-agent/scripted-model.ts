/**
 * A scripted stand-in for a hosted model (the AI SDK's `MockLanguageModelV4`), so the example runs
 * offline and deterministically. It behaves like a small assistant: asked to remember something, it
 * calls `memory_add`; asked anything else, it answers from the memory block the middleware injected.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { MockLanguageModelV4 } from "ai/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

function text(answer: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text: answer }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}

function respond(call: LanguageModelV4CallOptions): LanguageModelV4GenerateResult {
  const last = call.prompt.at(-1);
  if (last?.role === "tool") return text("Got it — I'll remember that.");
  const userText =
    last?.role === "user"
      ? last.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
      : "";
  const remember = /^remember that (.+)$/i.exec(userText.trim());
  if (remember !== null) {
    return {
      content: [
        {
          type: "tool-call",
          toolCallId: `call-${Date.now()}`,
          toolName: "memory_add",
          input: JSON.stringify({ content: `The user says: ${remember[1]}`, kind: "preference" }),
        },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage,
      warnings: [],
    };
  }
  const memory = call.prompt
    .flatMap((message) => (message.role === "system" ? [message.content] : []))
    .join("\n");
  if (/vegetarian/i.test(memory) && /cook|dinner|eat/i.test(userText)) {
    return text("Since you're vegetarian, how about a mushroom risotto tonight?");
  }
  return text("I don't know anything about that yet.");
}

export function createScriptedModel() {
  return new MockLanguageModelV4({ doGenerate: async (call) => respond(call) });
}
