/** One model-issued call (model-safe name, JSON argument text) run through a tool set; its answer as text. */
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import type { CallOptions, ToolCallResult, ToolSet } from "../tool-set/create-tool-set.ts";

/** The options every OpenAI helper passes on to `toolset.call`, besides the model's call id. */
export type OpenAICallOptions = Omit<CallOptions, "callId" | "idempotencyKey" | "takeover">;

/**
 * Runs a call as the model named it. Unparsable arguments come back as `invalid_input` and an unknown
 * name as `unknown_tool`, both as data, so one bad call never sinks the others of its turn.
 */
export async function callFromModel(
  toolset: ToolSet,
  llmName: string,
  argumentText: string,
  callId: string,
  options: OpenAICallOptions,
): Promise<ToolCallResult> {
  const name = toolset.fromLlmName(llmName) ?? llmName;
  let args: unknown;
  try {
    args = argumentText.trim() === "" ? {} : JSON.parse(argumentText);
  } catch (error) {
    return {
      ok: false,
      error: new InvalidInputError(name, [
        { path: [], message: `Arguments are not valid JSON: ${(error as Error).message}` },
      ]),
    };
  }
  return toolset.call(name, args, { ...options, callId });
}

/** The text a model reads back: the output (strings as they are, the rest as JSON) or `{ error }`. */
export function resultText(result: ToolCallResult): string {
  if (!result.ok) return JSON.stringify({ error: result.error.toJSON() });
  if (typeof result.output === "string") return result.output;
  return JSON.stringify(result.output ?? null);
}
