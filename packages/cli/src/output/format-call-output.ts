/**
 * What `tackle call` prints for a tool's output. A JSON value prints as JSON. Content blocks (a tool
 * that returned `toolContent(...)`, or a stdio child's MCP result) print as what they carry: the
 * structured object beside the blocks when there is one, plain text when every block is text, and
 * otherwise the blocks themselves as JSON (`{"content": [...]}`), never the internal marker.
 */
import { isToolContent } from "@tackle/core";

export function formatCallOutput(output: unknown): string {
  if (!isToolContent(output)) return `${JSON.stringify(output, null, 2) ?? "null"}\n`;
  if (output.structuredContent !== undefined) return `${JSON.stringify(output.structuredContent, null, 2)}\n`;
  const blocks = output.content;
  if (blocks.length > 0 && blocks.every((block) => block.type === "text")) {
    const text = blocks.map((block) => (block as { text: string }).text).join("\n");
    return text.endsWith("\n") ? text : `${text}\n`;
  }
  return `${JSON.stringify({ content: blocks }, null, 2)}\n`;
}
