import { hasBrand, setBrand } from "./brand.ts";

const toolDefinitionErrorBrand = Symbol.for("tackle.core.tool-definition-error");

/** Why a tool or a tool set cannot be built as given. */
export type ToolDefinitionErrorCode = "invalid_tool_definition" | "duplicate_tool";

/**
 * `invalid_tool_definition` or `duplicate_tool`: a tool or a tool set cannot be built as given.
 * A programming error thrown at definition time, never during a call, so it is not a `ToolError`:
 * it never crosses a wire and no model sees it.
 */
export class ToolDefinitionError extends Error {
  readonly code: ToolDefinitionErrorCode;
  /** The tool's name and where it was defined (both sources for a duplicate). */
  readonly data: Readonly<Record<string, unknown>>;

  constructor(code: ToolDefinitionErrorCode, message: string, data: Readonly<Record<string, unknown>>) {
    super(message);
    this.name = "ToolDefinitionError";
    this.code = code;
    this.data = data;
    setBrand(this, toolDefinitionErrorBrand);
  }

  /** True for a ToolDefinitionError from any copy of this package. */
  static isInstance(value: unknown): value is ToolDefinitionError {
    return hasBrand(value, toolDefinitionErrorBrand);
  }
}
