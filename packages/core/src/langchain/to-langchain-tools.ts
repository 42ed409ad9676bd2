/** `toLangChainTools`: a Tackle tool set as LangChain structured tools. */
import type { CallbackManagerForToolRun } from "@langchain/core/callbacks/manager";
import { ToolMessage } from "@langchain/core/messages";
import type { ToolRunnableConfig } from "@langchain/core/tools";
import { StructuredTool, ToolInputParsingException } from "@langchain/core/tools";
import { errorForModel, jsonText, notJsonOutput } from "../errors/error-for-model.ts";
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import type { ToolError } from "../errors/tool-error.ts";
import { defaultResultBudget } from "../mcp/result-pages/create-result-pages.ts";
import {
  assertNoPagingToolClash,
  createTextPages,
  modelPagingToolName,
  type TextPages,
} from "../mcp/result-pages/text-pages.ts";
import { type JsonSchema, validateWith, withoutDialect } from "../schema/schema.ts";
import type { AnyTool } from "../tool/define-tool.ts";
import type { CallOptions, ToolSet } from "../tool-set/create-tool-set.ts";

type CallOptionsOf = Omit<LangChainToolsOptions, "resultBudget">;

/** What every call through these tools carries besides LangChain's tool-call id and abort signal. */
export type LangChainToolsOptions = Omit<CallOptions, "signal" | "callId" | "idempotencyKey" | "takeover"> & {
  /**
   * Tokens (o200k) of one tool answer as a model reads it (ADR 0532): a call from a model (a
   * `ToolCall`) whose answer is past it is answered with a `ToolMessage` of its first part, what was
   * left out and a cursor, the whole output as its artifact; `tackle_result_page`, added after the
   * set's tools, reads on. A call with plain arguments (a program's) gets the whole output. Default
   * 8,000; at least 1,500; `false` hands the model every answer whole.
   */
  readonly resultBudget?: number | false;
};

/**
 * Wraps every tool of the set as a LangChain `StructuredTool`, named by its model-safe name, with the
 * derived JSON Schema. Invoked with a `ToolCall` (as agents do), a failure — invalid input included —
 * comes back as a `ToolMessage` with `status: "error"` whose content is `{ "error": { code, … } }` and
 * whose artifact is the coded error; invoked with plain arguments, the `ToolError` is thrown.
 */
export function toLangChainTools(toolset: ToolSet, options: LangChainToolsOptions = {}): StructuredTool[] {
  const { resultBudget = defaultResultBudget, ...callOptions } = options;
  if (resultBudget !== false) assertNoPagingToolClash(toolset);
  const pages = resultBudget === false ? undefined : createTextPages(resultBudget);
  const tools: StructuredTool[] = toolset.tools.map(
    (tool) => new ToolSetTool(toolset, tool, callOptions, { pages, resultBudget }),
  );
  return pages === undefined ? tools : [...tools, new PagingTool(pages)];
}

/** `tackle_result_page`: the next part of an answer cut to the budget. */
class PagingTool extends StructuredTool<JsonSchema> {
  name = modelPagingToolName;
  description: string;
  schema: JsonSchema;
  readonly #pages: TextPages;

  constructor(pages: TextPages) {
    super();
    this.description = pages.description;
    this.schema = pages.inputSchema as JsonSchema;
    this.#pages = pages;
  }

  protected override async _call(
    args: unknown,
    _runManager?: CallbackManagerForToolRun,
    config?: ToolRunnableConfig,
  ): Promise<unknown> {
    const { ok, text } = this.#pages.page(args);
    const toolCallId = config?.toolCall?.id;
    if (ok || toolCallId === undefined) return text;
    return new ToolMessage({ status: "error", content: text, tool_call_id: toolCallId, name: this.name });
  }
}

class ToolSetTool extends StructuredTool<JsonSchema> {
  name: string;
  description: string;
  schema: JsonSchema;
  readonly #toolset: ToolSet;
  readonly #tool: AnyTool;
  readonly #options: CallOptionsOf;
  readonly #pages: TextPages | undefined;
  readonly #resultBudget: number | false;

  constructor(
    toolset: ToolSet,
    tool: AnyTool,
    options: CallOptionsOf,
    budget: { pages: TextPages | undefined; resultBudget: number | false },
  ) {
    super();
    this.name = toolset.llmName(tool.name);
    this.description = tool.description;
    this.schema = withoutDialect(tool.inputJsonSchema);
    this.#toolset = toolset;
    this.#tool = tool;
    this.#options = options;
    this.#pages = budget.pages;
    this.#resultBudget = budget.resultBudget;
  }

  // LangChain checks arguments against the JSON Schema before `_call` and throws a bare message; the
  // tool's own schema says precisely what is wrong, so a refused call is answered with those issues.
  // biome-ignore lint/suspicious/noExplicitAny: mirrors StructuredTool.call's generic signature
  override async call(arg: any, configArg?: any, tags?: string[]): Promise<any> {
    try {
      return await super.call(arg, configArg, tags);
    } catch (error) {
      if (!(error instanceof ToolInputParsingException)) throw error;
      const checked = await validateWith(this.#tool.input, arg);
      if (checked.ok) throw error;
      return this.#failure(new InvalidInputError(this.#tool.name, checked.issues), configArg);
    }
  }

  protected override async _call(
    args: unknown,
    _runManager?: CallbackManagerForToolRun,
    config?: ToolRunnableConfig,
  ): Promise<unknown> {
    const callId = config?.toolCall?.id;
    const result = await this.#toolset.call(this.#tool.name, args, {
      ...this.#options,
      ...(callId === undefined ? {} : { callId }),
      ...(config?.signal === undefined ? {} : { signal: config.signal }),
    });
    if (!result.ok) return this.#failure(result.error, config);
    if (this.#pages === undefined || callId === undefined) return result.output;
    // A model's call: what it reads is fitted to the budget; the whole output stays the artifact.
    const json = typeof result.output === "string" ? undefined : jsonText(result.output);
    if (json !== undefined && !json.ok)
      return this.#failure(notJsonOutput(this.#tool.name, json.reason), config);
    const text = json === undefined ? (result.output as string) : json.text;
    const fitted = this.#pages.fit(text);
    if (fitted === text) return result.output;
    return new ToolMessage({
      content: fitted,
      artifact: result.output,
      tool_call_id: callId,
      name: this.name,
    });
  }

  #failure(error: ToolError, config: unknown): ToolMessage {
    const toolCallId = (config as ToolRunnableConfig | undefined)?.toolCall?.id;
    if (toolCallId === undefined) throw error;
    return new ToolMessage({
      status: "error",
      // What the model reads is within the budget (ADR 0533); the artifact keeps the whole error.
      content: JSON.stringify({ error: errorForModel(error.toJSON(), this.#resultBudget) }),
      artifact: error.toJSON(),
      tool_call_id: toolCallId,
      name: this.name,
    });
  }
}
