/** `runChatToolCalls`: runs an assistant message's tool calls through a tool set; returns the tool messages. */
import type {
  ChatCompletionMessageToolCall,
  ChatCompletionToolMessageParam,
} from "openai/resources/chat/completions/completions";
import type { ToolSet } from "../tool-set/create-tool-set.ts";
import { answerFromModel, type OpenAICallOptions } from "./call-from-model.ts";
import { answerAtMost } from "./calls-at-once.ts";

/** The part of a chat completion message this helper reads. */
export interface ChatMessageWithToolCalls {
  readonly tool_calls?: readonly ChatCompletionMessageToolCall[] | null;
}

/**
 * Runs the tool calls of the message concurrently, at most `maxConcurrentCalls` (default 64) at
 * once, and answers each, in order, with a `role: "tool"` message to append to the conversation. Failures are answered too, as `{ "error": { code, … } }`.
 */
export async function runChatToolCalls(
  toolset: ToolSet,
  message: ChatMessageWithToolCalls,
  options: OpenAICallOptions = {},
): Promise<ChatCompletionToolMessageParam[]> {
  return answerAtMost(message.tool_calls ?? [], options.maxConcurrentCalls, async (toolCall) => {
    const [name, argumentText] =
      toolCall.type === "function"
        ? [toolCall.function.name, toolCall.function.arguments]
        : [toolCall.custom.name, JSON.stringify({ input: toolCall.custom.input })];
    const content = await answerFromModel(toolset, name, argumentText, toolCall.id, options);
    return { role: "tool", tool_call_id: toolCall.id, content };
  });
}
