/** `toLangChainTools`: a Tackle tool set as LangChain structured tools. */
import type { CallbackManagerForToolRun } from "@langchain/core/callbacks/manager";
import { ToolMessage } from "@langchain/core/messages";
import type { ToolRunnableConfig } from "@langchain/core/tools";
import { StructuredTool, ToolInputParsingException } from "@langchain/core/tools";
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import type { ToolError } from "../errors/tool-error.ts";
import { type JsonSchema, validateWith, withoutDialect } from "../schema/schema.ts";
import type { AnyTool } from "../tool/define-tool.ts";
import type { CallOptions, ToolSet } from "../tool-set/create-tool-set.ts";

/** What every call through these tools carries besides LangChain's tool-call id and abort signal. */
export type LangChainToolsOptions = Omit<CallOptions, "signal" | "callId" | "idempotencyKey" | "takeover">;

/**
 * Wraps every tool of the set as a LangChain `StructuredTool`, named by its model-safe name, with the
 * derived JSON Schema. Invoked with a `ToolCall` (as agents do), a failure — invalid input included —
 * comes back as a `ToolMessage` with `status: "error"` whose content is `{ "error": { code, … } }` and
 * whose artifact is the coded error; invoked with plain arguments, the `ToolError` is thrown.
 */
export function toLangChainTools(toolset: ToolSet, options: LangChainToolsOptions = {}): StructuredTool[] {
  return toolset.tools.map((tool) => new ToolSetTool(toolset, tool, options));
}

class ToolSetTool extends StructuredTool<JsonSchema> {
  name: string;
  description: string;
  schema: JsonSchema;
  readonly #toolset: ToolSet;
  readonly #tool: AnyTool;
  readonly #options: LangChainToolsOptions;

  constructor(toolset: ToolSet, tool: AnyTool, options: LangChainToolsOptions) {
    super();
    this.name = toolset.llmName(tool.name);
    this.description = tool.description;
    this.schema = withoutDialect(tool.inputJsonSchema);
    this.#toolset = toolset;
    this.#tool = tool;
    this.#options = options;
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
    if (result.ok) return result.output;
    return this.#failure(result.error, config);
  }

  #failure(error: ToolError, config: unknown): ToolMessage {
    const toolCallId = (config as ToolRunnableConfig | undefined)?.toolCall?.id;
    if (toolCallId === undefined) throw error;
    return new ToolMessage({
      status: "error",
      content: JSON.stringify({ error: error.toJSON() }),
      artifact: error.toJSON(),
      tool_call_id: toolCallId,
      name: this.name,
    });
  }
}
