import { ToolError } from "./tool-error.ts";
import { ToolFailedError } from "./tool-failed-error.ts";

/** Any thrown value as a ToolError: ToolErrors as they are, anything else wrapped as `tool_failed`. */
export function toToolError(tool: string, error: unknown): ToolError {
  return ToolError.isInstance(error) ? error : new ToolFailedError(tool, error);
}
