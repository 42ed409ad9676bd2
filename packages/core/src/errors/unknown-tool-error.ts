import { ToolError } from "./tool-error.ts";

/** `unknown_tool`: no tool by that name. `data.available` lists the names that exist. */
export class UnknownToolError extends ToolError {
  declare readonly data: { readonly tool: string; readonly available: readonly string[] };

  constructor(tool: string, available: readonly string[]) {
    super("unknown_tool", `Unknown tool "${tool}". Available: ${available.join(", ") || "(none)"}`, {
      data: { tool, available },
    });
    this.name = "UnknownToolError";
  }
}
