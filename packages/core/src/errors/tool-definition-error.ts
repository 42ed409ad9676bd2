import { ToolError } from "./tool-error.ts";

/**
 * `invalid_tool_definition` or `duplicate_tool`: a tool set cannot be built as given.
 * Thrown at definition time, never during a call.
 */
export class ToolDefinitionError extends ToolError {
  constructor(
    code: "invalid_tool_definition" | "duplicate_tool",
    message: string,
    data: Record<string, unknown>,
  ) {
    super(code, message, { data });
    this.name = "ToolDefinitionError";
  }
}
