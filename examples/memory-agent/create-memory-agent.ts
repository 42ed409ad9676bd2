/**
 * A small agent with long-term memory: the model is wrapped by `withMemory` (context injected,
 * turns captured) and holds the memory tools (it can store what it is told). One instance serves
 * many users; each `ask` names its user and session.
 */
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { createToolSet } from "@tackle/core";
import { toAiSdkTools } from "@tackle/core/ai-sdk";
import { createMemoryTools, type MemoryClient } from "@tackle/memory";
import { withMemory } from "@tackle/memory/ai-sdk";
import { generateText, stepCountIs } from "ai";

export interface MemoryAgentOptions {
  readonly model: LanguageModelV4;
  readonly client: MemoryClient;
  /** How long the model waits for its memory context before it is called without (default 300 ms). */
  readonly contextTimeoutMs?: number;
}

export function createMemoryAgent({ model, client, contextTimeoutMs }: MemoryAgentOptions) {
  const remembering = withMemory(model, {
    client,
    awaitCapture: true,
    ...(contextTimeoutMs === undefined ? {} : { contextTimeoutMs }),
  });
  const toolset = createToolSet(createMemoryTools(client));
  return {
    async ask(userId: string, sessionId: string, prompt: string): Promise<string> {
      const result = await generateText({
        model: remembering,
        system: "You are a helpful cooking assistant.",
        prompt,
        // The tools act for this user only: the identity binds their scope fields.
        tools: toAiSdkTools(toolset, { identity: { userId } }),
        stopWhen: stepCountIs(4),
        providerOptions: { memory: { userId, sessionId } },
      });
      return result.text;
    },
  };
}
