/** `toAiSdkTools`: a Tackle tool set as AI SDK tools, keyed by the set's model-safe names. */
import { type Tool as AiSdkTool, type ToolSet as AiSdkToolSet, type JSONValue, jsonSchema, tool } from "ai";
import { errorForModel, jsonText, notJsonOutput } from "../errors/error-for-model.ts";
import type { ToolErrorPayload } from "../errors/tool-error.ts";
import { setOwn } from "../internal/own-keys.ts";
import { defaultResultBudget } from "../mcp/result-pages/create-result-pages.ts";
import { modelPagingToolName } from "../mcp/result-pages/text-pages.ts";
import { withoutDialect } from "../schema/schema.ts";
import type { AnyTool } from "../tool/define-tool.ts";
import type {
  CallOptions,
  ToolInput,
  ToolOutput,
  ToolSet,
  TypedToolSet,
} from "../tool-set/create-tool-set.ts";
import type { LlmName } from "../tool-set/llm-name.ts";
import { createModelOutputBudget, type ModelOutput, wholeOutput } from "./budgeted-output.ts";

/** What every call through these tools carries besides the AI SDK's own call id and abort signal. */
export type AiSdkToolsOptions = Omit<CallOptions, "signal" | "callId" | "idempotencyKey" | "takeover"> & {
  /**
   * Tokens (o200k) of one tool answer as the model reads it (ADR 0532). Past it the model reads the
   * first part, what was left out and a cursor, and reads on with `tackle_result_page`, added beside
   * the set's tools; the program's own results (`toolResults`, `onStepFinish`) keep the whole output.
   * Default 8,000; at least 1,500; `false` hands the model every answer whole.
   */
  readonly resultBudget?: number | false;
};

/** The output an AI SDK tool returns when the Tackle call failed: the coded error, as data. */
export interface AiSdkToolFailure {
  readonly ok: false;
  readonly error: ToolErrorPayload;
}

/**
 * The AI SDK tools of a typed set: keyed by each tool's model-safe name, each typed by its tool's input
 * and output (or the failure), so `generateText`'s tool calls and results are typed too.
 */
export type AiSdkToolsOf<Tools extends AnyTool> = {
  [T in Tools as LlmName<T["name"]>]: AiSdkTool<ToolInput<T>, ToolOutput<T> | AiSdkToolFailure>;
} & {
  /** Reads the next part of an answer cut to the budget; absent with `resultBudget: false`. */
  readonly tackle_result_page?: AiSdkTool<{ cursor: string }, unknown>;
};

/**
 * Wraps every tool of the set as an AI SDK tool. Input schemas are the JSON Schemas derived at
 * definition; `toolset.call` validates, so invalid input, timeouts and failures come back to the model
 * as an `error-json` tool result it can act on (`{ code, message, retryable, data }`), not as a thrown
 * error that keeps only a message. Control-flow throws (durable interrupts) pass through untouched.
 */
export function toAiSdkTools<Tools extends AnyTool>(
  toolset: TypedToolSet<Tools>,
  options?: AiSdkToolsOptions,
): AiSdkToolsOf<Tools>;
/** A set known only at run time: a record of untyped AI SDK tools. */
export function toAiSdkTools(toolset: ToolSet, options?: AiSdkToolsOptions): AiSdkToolSet;
export function toAiSdkTools(toolset: ToolSet, options: AiSdkToolsOptions = {}): AiSdkToolSet {
  const { resultBudget = defaultResultBudget, ...callOptions } = options;
  const budget = resultBudget === false ? undefined : createModelOutputBudget(resultBudget, toolset);
  const tools: AiSdkToolSet = {};
  for (const definition of toolset.tools) {
    // Defined, not assigned: a tool named `__proto__` would otherwise set the record's prototype and
    // vanish from it (ADR 0546).
    setOwn(
      tools,
      toolset.llmName(definition.name),
      tool({
        description: definition.description,
        inputSchema: jsonSchema(withoutDialect(definition.inputJsonSchema)),
        async execute(input, execution) {
          const result = await toolset.call(definition.name, input, {
            ...callOptions,
            callId: execution.toolCallId,
            ...(execution.abortSignal === undefined ? {} : { signal: execution.abortSignal }),
          });
          if (result.ok) return result.output;
          return { ok: false, error: result.error.toJSON() } satisfies AiSdkToolFailure;
        },
        toModelOutput({ toolCallId, output }): ModelOutput {
          if (isAiSdkToolFailure(output)) return failureOutput(output.error, resultBudget);
          // Written once: the check that JSON can write the output is the text the budget measures.
          const json = typeof output === "string" ? { ok: true as const, text: output } : jsonText(output);
          if (!json.ok) {
            return failureOutput(notJsonOutput(definition.name, json.reason).toJSON(), resultBudget);
          }
          return budget === undefined ? wholeOutput(output) : budget.fit(toolCallId, output, json.text);
        },
      }),
    );
  }
  if (budget !== undefined) tools[modelPagingToolName] = budget.pagingTool;
  return tools;
}

/** A failed call as the model reads it: the coded error within the budget (ADR 0533). */
function failureOutput(error: ToolErrorPayload, resultBudget: number | false): ModelOutput {
  return { type: "error-json", value: errorForModel(error, resultBudget) as unknown as JSONValue };
}

/** True for the output of a failed call (see `AiSdkToolFailure`). */
export function isAiSdkToolFailure(output: unknown): output is AiSdkToolFailure {
  if (typeof output !== "object" || output === null) return false;
  const candidate = output as { ok?: unknown; error?: { code?: unknown; message?: unknown } };
  return (
    candidate.ok === false &&
    typeof candidate.error === "object" &&
    candidate.error !== null &&
    typeof candidate.error.code === "string" &&
    typeof candidate.error.message === "string"
  );
}
