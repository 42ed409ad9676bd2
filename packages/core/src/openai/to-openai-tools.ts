/** Tool definitions for OpenAI's two APIs, from a Tackle tool set: chat completions and responses. */

import type { ChatCompletionFunctionTool } from "openai/resources/chat/completions/completions";
import type { FunctionTool } from "openai/resources/responses/responses";
import { modelPagingToolName } from "../mcp/result-pages/text-pages.ts";
import { withoutDialect } from "../schema/schema.ts";
import type { ToolSet } from "../tool-set/create-tool-set.ts";
import { type ResultBudgetOption, textPagesOf } from "./call-from-model.ts";

/**
 * `tools` for `client.chat.completions.create`: one function per tool, named by its model-safe name,
 * then `tackle_result_page`, which reads on in an answer cut to the budget (`resultBudget: false`
 * leaves it out; pass the same to `runChatToolCalls`).
 */
export function toOpenAIChatTools(
  toolset: ToolSet,
  options: ResultBudgetOption = {},
): ChatCompletionFunctionTool[] {
  return definitions(toolset, options).map(({ name, description, parameters }) => ({
    type: "function",
    function: { name, description, parameters },
  }));
}

/**
 * `tools` for `client.responses.create`. `strict` stays off: strict mode demands every property be
 * required and closed, which most tool schemas are not; `toolset.call` validates instead.
 */
export function toOpenAIResponseTools(toolset: ToolSet, options: ResultBudgetOption = {}): FunctionTool[] {
  return definitions(toolset, options).map((definition) => ({
    type: "function",
    ...definition,
    strict: false,
  }));
}

/** Every tool's model-safe name, description and JSON Schema, and the paging tool's when budgeted. */
function definitions(toolset: ToolSet, options: ResultBudgetOption) {
  const tools = toolset.tools.map((tool) => ({
    name: toolset.llmName(tool.name),
    description: tool.description,
    parameters: withoutDialect(structuredClone(tool.inputJsonSchema)),
  }));
  const pages = textPagesOf(toolset, options.resultBudget);
  if (pages === undefined) return tools;
  return [
    ...tools,
    {
      name: modelPagingToolName,
      description: pages.description,
      parameters: structuredClone(pages.inputSchema),
    },
  ];
}
