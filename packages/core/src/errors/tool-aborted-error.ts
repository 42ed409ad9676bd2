import { ToolError } from "./tool-error.ts";

/** `aborted`: the caller cancelled the call through its signal. */
export class ToolAbortedError extends ToolError {
  declare readonly data: { readonly tool: string };

  constructor(tool: string, cause?: unknown) {
    super("aborted", `Call to tool "${tool}" was aborted`, { data: { tool }, cause });
    this.name = "ToolAbortedError";
  }
}
