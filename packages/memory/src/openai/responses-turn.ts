/** Responses API: reading a turn from its input, injecting the envelope, collecting the answer. */
import type { TurnMessage } from "../middleware/turn-message.ts";
import {
  contentText,
  type ResponseObject,
  type ResponseParams,
  type ResponseStreamEvent,
} from "./openai-shapes.ts";

type InputItem = { role?: string; type?: string; content?: unknown; output?: unknown };

export function responsesTurnMessages(params: ResponseParams): TurnMessage[] {
  const input = params.input;
  if (typeof input === "string") return [{ role: "user", text: input }];
  if (!Array.isArray(input)) return [];
  return (input as InputItem[]).map((item): TurnMessage => {
    if (item.role === "system" || item.role === "developer")
      return { role: "system", text: contentText(item.content) };
    if (item.role === "user" || item.role === "assistant")
      return { role: item.role, text: contentText(item.content) };
    return {
      role: "tool",
      text: typeof item.output === "string" ? item.output : JSON.stringify(item.output ?? ""),
    };
  });
}

/** A copy of the params with the envelope as a system item ahead of the conversation. */
export function injectIntoResponses(params: ResponseParams, text: string): ResponseParams {
  const envelope = { role: "system", content: text };
  const input = params.input;
  if (typeof input === "string") return { ...params, input: [envelope, { role: "user", content: input }] };
  const items = (input ?? []) as InputItem[];
  const leading = items.findIndex((item) => item.role !== "system" && item.role !== "developer");
  const at = leading === -1 ? items.length : leading;
  return { ...params, input: [...items.slice(0, at), envelope, ...items.slice(at)] };
}

/** The answer to capture, or undefined when the response ended in a function call. */
export function responseAnswer(response: ResponseObject): string | undefined {
  const output = response.output ?? [];
  if (output.some((item) => item.type === "function_call")) return undefined;
  if (typeof response.output_text === "string") return response.output_text;
  return output
    .filter((item) => item.type === "message")
    .flatMap((item) =>
      (item.content ?? []).filter((part) => part.type === "output_text").map((part) => part.text ?? ""),
    )
    .join("");
}

export function createResponsesStreamCollector() {
  let answer: string | undefined;
  return {
    observe(event: ResponseStreamEvent) {
      if (event.type === "response.completed" && event.response !== undefined)
        answer = responseAnswer(event.response);
    },
    answer: () => answer,
  };
}
