/** The one mapping from a Tackle call result to an MCP `CallToolResult`, used by every MCP server of Tackle. */
import type { CallToolResult } from "@modelcontextprotocol/server";
import { errorForModel, jsonText, notJsonOutput } from "../errors/error-for-model.ts";
import { isToolContent } from "../tool/tool-content.ts";
import type { ToolCallResult } from "../tool-set/create-tool-set.ts";

/**
 * - A failure is an `isError` result: the text `code: message` for a model to read, and
 *   `structuredContent.error` with the coded error `{ code, message, retryable, data }` for machines.
 * - Content blocks (`toolContent(...)`, or a result that came from an MCP server) pass through as
 *   they are, with their structured object when there is one.
 * - Any other output is JSON text, so a client reads back the value itself (42 stays a number, "42" a
 *   string); a plain object is also the structured content. An output JSON cannot write (a BigInt, a
 *   cycle) is `invalid_output` naming `tool`.
 */
export function toCallToolResult(result: ToolCallResult, tool = "tool"): CallToolResult {
  if (!result.ok) {
    // Data JSON cannot write is left out and named (ADR 0533): the SDK would otherwise answer the
    // serializer's message alone, without the code.
    const error = errorForModel(result.error.toJSON(), false);
    return {
      isError: true,
      content: [{ type: "text", text: `${error.code}: ${error.message}` }],
      structuredContent: { error: error as unknown as Record<string, unknown> },
    };
  }
  const { output } = result;
  if (isToolContent(output)) {
    return {
      content: output.content as CallToolResult["content"],
      ...(output.structuredContent === undefined ? {} : { structuredContent: output.structuredContent }),
    };
  }
  const json = jsonText(output);
  if (!json.ok) return toCallToolResult({ ok: false, error: notJsonOutput(tool, json.reason) });
  const text = json.text;
  return {
    content: [{ type: "text", text }],
    ...(isPlainObject(output) ? { structuredContent: output } : {}),
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
