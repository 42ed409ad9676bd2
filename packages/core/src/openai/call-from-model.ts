/** One model-issued call (model-safe name, JSON argument text) run through a tool set; its answer as text. */
import { errorForModel, jsonText, notJsonOutput } from "../errors/error-for-model.ts";
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import { defaultResultBudget } from "../mcp/result-pages/create-result-pages.ts";
import {
  assertNoPagingToolClash,
  createTextPages,
  modelPagingToolName,
  type TextPages,
} from "../mcp/result-pages/text-pages.ts";
import type { CallOptions, ToolCallResult, ToolSet } from "../tool-set/create-tool-set.ts";
import type { ConcurrentCallsOption } from "./calls-at-once.ts";

/** The options every OpenAI helper passes on to `toolset.call`, besides the model's call id. */
export type OpenAICallOptions = Omit<CallOptions, "callId" | "idempotencyKey" | "takeover"> &
  ResultBudgetOption &
  ConcurrentCallsOption;

export interface ResultBudgetOption {
  /**
   * Tokens (o200k) of one tool answer as the model reads it (ADR 0532): past it, the first part, what
   * was left out and a cursor that `tackle_result_page` (in the tool definitions) reads on. Default
   * 8,000; at least 1,500; `false` hands the model every answer whole. Pass the same to the
   * definitions and the helpers that run the calls.
   */
  readonly resultBudget?: number | false;
}

/** One budget's cut answers per tool set, kept between the turns of its conversations. */
const kept = new WeakMap<ToolSet, Map<number, TextPages>>();

/** The set's cut answers at that budget, or none when the model reads answers whole. */
export function textPagesOf(
  toolset: ToolSet,
  resultBudget: number | false | undefined,
): TextPages | undefined {
  if (resultBudget === false) return undefined;
  const budget = resultBudget ?? defaultResultBudget;
  let byBudget = kept.get(toolset);
  if (byBudget === undefined) {
    assertNoPagingToolClash(toolset);
    byBudget = new Map();
    kept.set(toolset, byBudget);
  }
  let pages = byBudget.get(budget);
  if (pages === undefined) {
    pages = createTextPages(budget);
    byBudget.set(budget, pages);
  }
  return pages;
}

/**
 * The text a model reads back for one of its calls: the paging tool's next part, or the tool's
 * answer (`resultText`) fitted to the budget.
 */
export async function answerFromModel(
  toolset: ToolSet,
  llmName: string,
  argumentText: string,
  callId: string,
  options: OpenAICallOptions,
): Promise<string> {
  const { resultBudget, maxConcurrentCalls: _, ...callOptions } = options;
  const pages = textPagesOf(toolset, resultBudget);
  if (pages !== undefined && llmName === modelPagingToolName) {
    const args = parseArguments(modelPagingToolName, argumentText);
    return args.ok ? pages.page(args.value).text : resultText(llmName, { ok: false, error: args.error });
  }
  const result = await callFromModel(toolset, llmName, argumentText, callId, callOptions);
  const text = resultText(toolset.fromLlmName(llmName) ?? llmName, result, resultBudget);
  return result.ok && pages !== undefined ? pages.fit(text) : text;
}

/**
 * Runs a call as the model named it. Unparsable arguments come back as `invalid_input` and an unknown
 * name as `unknown_tool`, both as data, so one bad call never sinks the others of its turn.
 */
export async function callFromModel(
  toolset: ToolSet,
  llmName: string,
  argumentText: string,
  callId: string,
  options: Omit<CallOptions, "callId" | "idempotencyKey" | "takeover">,
): Promise<ToolCallResult> {
  const name = toolset.fromLlmName(llmName) ?? llmName;
  const args = parseArguments(name, argumentText);
  if (!args.ok) return args;
  return toolset.call(name, args.value, { ...options, callId });
}

function parseArguments(
  name: string,
  argumentText: string,
): { ok: true; value: unknown } | { ok: false; error: InvalidInputError } {
  try {
    return { ok: true, value: argumentText.trim() === "" ? {} : JSON.parse(argumentText) };
  } catch (error) {
    return {
      ok: false,
      error: new InvalidInputError(name, [
        { path: [], message: `Arguments are not valid JSON: ${(error as Error).message}` },
      ]),
    };
  }
}

/**
 * The text a model reads back: the output (strings as they are, the rest as JSON) or `{ error }`, the
 * error within the budget and an output JSON cannot write answered as `invalid_output` (ADR 0533).
 */
export function resultText(
  tool: string,
  result: ToolCallResult,
  resultBudget: number | false = defaultResultBudget,
): string {
  if (!result.ok) return JSON.stringify({ error: errorForModel(result.error.toJSON(), resultBudget) });
  if (typeof result.output === "string") return result.output;
  const json = jsonText(result.output);
  if (json.ok) return json.text;
  return JSON.stringify({ error: errorForModel(notJsonOutput(tool, json.reason).toJSON(), resultBudget) });
}
