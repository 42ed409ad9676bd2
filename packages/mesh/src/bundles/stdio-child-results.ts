/**
 * What a stdio child's answers become: its result as the call's output (or `tool_failed`), and the
 * caller's arguments it refused, or could not be sent, as `invalid_input`.
 */
import { isDeepStrictEqual } from "node:util";
import { type ContentBlock, ToolError, toolContent } from "@tackle/core";

export interface CallResult {
  readonly isError?: boolean;
  readonly structuredContent?: Record<string, unknown>;
  readonly content?: readonly ContentBlock[];
}

/**
 * The child's result as it came: its content blocks (text, images, audio, resources) with its
 * structured object beside them. Only when the blocks say nothing but that object (one text block
 * holding its JSON, or none) is the output the plain value, which every MCP server sends back as the
 * same JSON.
 */
export function toOutput(tool: string, result: CallResult): unknown {
  const content = result.content ?? [];
  if (result.isError === true) {
    const text = content
      .map((block) => (block.type === "text" ? block.text : ""))
      .join("\n")
      .trim();
    // The MCP SDKs answer a call whose arguments fail the tool's schema as an error result that
    // spells the JSON-RPC code: the caller's input was refused, and the tool did not run.
    if (invalidParamsText.test(text)) throw invalidInput(tool, text, { content });
    throw new ToolError("tool_failed", `Tool "${tool}" failed: ${text || "the child reported an error"}`, {
      data: { tool, content },
    });
  }
  const structured = result.structuredContent;
  if (structured !== undefined && saysOnly(content, structured)) return structured;
  return toolContent(content, structured === undefined ? {} : { structuredContent: structured });
}

function saysOnly(content: readonly ContentBlock[], structured: unknown): boolean {
  if (content.length === 0) return true;
  const [only] = content;
  if (content.length !== 1 || only?.type !== "text") return false;
  try {
    return isDeepStrictEqual(JSON.parse(only.text), structured);
  } catch {
    return false;
  }
}

/** How the MCP SDKs spell an invalid-params refusal in a tool's error result. */
const invalidParamsText = /^MCP error -32602\b/;

/** The child refused the arguments (JSON-RPC -32602), thrown as a protocol error: `invalid_input`. */
export function refusedInput(name: string, error: unknown): ToolError | undefined {
  if ((error as { code?: unknown } | null)?.code !== -32602) return undefined;
  return invalidInput(name, (error as Error).message, {});
}

/** A refusal of the caller's arguments, as an in-process tool's schema refuses them (not retryable). */
function invalidInput(tool: string, message: string, data: Record<string, unknown>): ToolError {
  return new ToolError("invalid_input", `Invalid input for tool "${tool}": ${message}`, {
    retryable: false,
    data: { tool, issues: [{ path: [], message }], ...data },
  });
}

/**
 * Arguments nested past the stack (a caller's 100,000 levels fit in a message) cannot be written to
 * the child: the call never reached it, so it is the caller's invalid input, not the tool's failure.
 */
export function tooDeepToSend(name: string, source: string, error: unknown): ToolError | undefined {
  if (!(error instanceof RangeError && /call stack/i.test(error.message))) return undefined;
  return new ToolError(
    "invalid_input",
    `Invalid input for tool "${name}": the arguments nest too deeply to send to its child process (${source}); it did not run`,
    {
      retryable: false,
      data: { tool: name, issues: [{ path: [], message: "The arguments nest too deeply to send" }] },
    },
  );
}
