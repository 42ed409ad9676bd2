/** `tackle tools` as a table: one row per module with its status and tools, errors beneath. */
import type { ModuleInfo } from "../tool-source/tool-source.ts";
import type { Paint } from "./colour.ts";

export function formatModules(modules: readonly ModuleInfo[], paint: Paint): string {
  if (modules.length === 0) return "No modules.\n";
  const rows = modules.map((info) => ({
    info,
    cells: [
      info.module,
      info.status,
      info.node ?? "-",
      info.tools.map((tool) => tool.name).join(", ") || "-",
    ],
  }));
  const header = ["MODULE", "STATUS", "NODE", "TOOLS"];
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row.cells[column]!.length)),
  );
  const line = (cells: readonly string[], status?: ModuleInfo["status"]) =>
    cells
      .map((cell, column) => {
        const padded = column === cells.length - 1 ? cell : cell.padEnd(widths[column]!);
        if (column !== 1 || status === undefined) return padded;
        return status === "ok"
          ? paint.green(padded)
          : status === "failed"
            ? paint.red(padded)
            : paint.yellow(padded);
      })
      .join("  ")
      .trimEnd();
  const lines = [paint.bold(line(header))];
  for (const row of rows) {
    lines.push(line(row.cells, row.info.status));
    for (const error of row.info.errors) lines.push(paint.dim(`  ${error.source}: ${error.message}`));
  }
  return `${lines.join("\n")}\n`;
}
