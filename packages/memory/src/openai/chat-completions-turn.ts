/** Chat Completions: reading a turn from its messages, injecting the envelope, collecting the answer. */
import type { TurnMessage } from "../middleware/turn-message.ts";
import {
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionParams,
  type ChatMessageParam,
  contentText,
} from "./openai-shapes.ts";

export function chatTurnMessages(messages: readonly ChatMessageParam[]): TurnMessage[] {
  return messages.map((message) => ({ role: turnRole(message.role), text: contentText(message.content) }));
}

function turnRole(role: string): TurnMessage["role"] {
  if (role === "system" || role === "developer") return "system";
  if (role === "user" || role === "assistant") return role;
  return "tool";
}

/** A copy of the params with the envelope after the caller's leading system and developer messages. */
export function injectIntoChat(params: ChatCompletionParams, text: string): ChatCompletionParams {
  const messages = params.messages;
  const leading = messages.findIndex((message) => message.role !== "system" && message.role !== "developer");
  const at = leading === -1 ? messages.length : leading;
  return {
    ...params,
    messages: [...messages.slice(0, at), { role: "system", content: text }, ...messages.slice(at)],
  };
}

/** The answer to capture, or undefined when the model stopped to call tools. */
export function chatAnswer(completion: ChatCompletion): string | undefined {
  const choice = completion.choices[0];
  if (choice === undefined || choice.finish_reason === "tool_calls") return undefined;
  return choice.message?.content ?? undefined;
}

/** Accumulates a streamed answer chunk by chunk. */
export function createChatStreamCollector() {
  let text = "";
  let toolCalls = false;
  let finished = false;
  return {
    observe(chunk: ChatCompletionChunk) {
      const choice = chunk.choices?.[0];
      if (choice === undefined) return;
      text += choice.delta?.content ?? "";
      if (choice.finish_reason) {
        finished = true;
        toolCalls ||= choice.finish_reason === "tool_calls";
      }
    },
    answer: (): string | undefined => (finished && !toolCalls ? text : undefined),
  };
}
