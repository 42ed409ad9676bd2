/** Tool definitions for OpenAI's two APIs, from a Tackle tool set: chat completions and responses. */

import type { ChatCompletionFunctionTool } from "openai/resources/chat/completions/completions";
import type { FunctionTool } from "openai/resources/responses/responses";
import { withoutDialect } from "../schema/schema.ts";
import type { ToolSet } from "../tool-set/create-tool-set.ts";

/** `tools` for `client.chat.completions.create`: one function per tool, named by its model-safe name. */
export function toOpenAIChatTools(toolset: ToolSet): ChatCompletionFunctionTool[] {
  return toolset.tools.map((tool) => ({
    type: "function",
    function: {
      name: toolset.llmName(tool.name),
      description: tool.description,
      parameters: withoutDialect(structuredClone(tool.inputJsonSchema)),
    },
  }));
}

/**
 * `tools` for `client.responses.create`. `strict` stays off: strict mode demands every property be
 * required and closed, which most tool schemas are not; `toolset.call` validates instead.
 */
export function toOpenAIResponseTools(toolset: ToolSet): FunctionTool[] {
  return toolset.tools.map((tool) => ({
    type: "function",
    name: toolset.llmName(tool.name),
    description: tool.description,
    parameters: withoutDialect(structuredClone(tool.inputJsonSchema)),
    strict: false,
  }));
}
