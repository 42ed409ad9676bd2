import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";

/** `unknown_tool`: no tool by that name. `data.available` lists the names that exist. */
export class UnknownToolError extends ToolError<"unknown_tool", ToolErrorDataByCode["unknown_tool"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.unknown-tool-error");

  constructor(tool: string, available: readonly string[]) {
    super("unknown_tool", `Unknown tool "${tool}". Available: ${available.join(", ") || "(none)"}`, {
      data: { tool, available },
    });
    this.name = "UnknownToolError";
  }
}
