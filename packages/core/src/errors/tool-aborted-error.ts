import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";

/** `aborted`: the caller cancelled the call through its signal. */
export class ToolAbortedError extends ToolError<"aborted", ToolErrorDataByCode["aborted"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.tool-aborted-error");

  constructor(tool: string, cause?: unknown) {
    super("aborted", `Call to tool "${tool}" was aborted`, { data: { tool }, cause });
    this.name = "ToolAbortedError";
  }
}
