/** `runResponseToolCalls`: runs a Responses API response's function calls; returns `function_call_output` items. */
import type { ResponseInputItem, ResponseOutputItem } from "openai/resources/responses/responses";
import type { ToolSet } from "../tool-set/create-tool-set.ts";
import { answerFromModel, type OpenAICallOptions } from "./call-from-model.ts";
import { answerAtMost } from "./calls-at-once.ts";

/** The part of a response this helper reads: its `output` items (or the items themselves). */
export type ResponseWithFunctionCalls =
  | { readonly output: readonly ResponseOutputItem[] }
  | readonly ResponseOutputItem[];

/**
 * Runs the `function_call` items concurrently, at most `maxConcurrentCalls` (default 64) at once,
 * and answers each, in order, with a `function_call_output` item to send as the next turn's input.
 * Failures are answered as `{ "error": { code, … } }`.
 */
export async function runResponseToolCalls(
  toolset: ToolSet,
  response: ResponseWithFunctionCalls,
  options: OpenAICallOptions = {},
): Promise<ResponseInputItem.FunctionCallOutput[]> {
  const items = "output" in response ? response.output : response;
  const calls = items.filter((item) => item.type === "function_call");
  return answerAtMost(calls, options.maxConcurrentCalls, async (call) => {
    const output = await answerFromModel(toolset, call.name, call.arguments, call.call_id, options);
    return { type: "function_call_output", call_id: call.call_id, output };
  });
}
