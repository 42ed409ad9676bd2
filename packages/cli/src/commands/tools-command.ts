/** `tackle tools`: every module with its status and tools; `--json` for machines. */
import type { Command } from "commander";
import { withoutSeatTools } from "../mcp/module-contributions.ts";
import { createPaint } from "../output/colour.ts";
import { formatModules } from "../output/format-modules.ts";
import { openToolSource } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import { sourceOptions } from "./source-options.ts";

export function addToolsCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("tools")
    .description("List every module with its status (ok, failed, unreachable) and its tools")
    .option("--json", "print the catalogue as JSON (module, status, node, tools with schemas, errors)")
    .option(
      "--allow-unhealthy",
      "exit 0 even when a module failed or is unreachable (by default such a listing exits 1)",
    );
  sourceOptions(command).action(
    async (options: { json?: boolean; allowUnhealthy?: boolean; console?: string; tokenFile?: string }) => {
      const source = await openToolSource({ ...options, env: context.env, logger: context.logger });
      try {
        // The `mcp` seat's verbs serve MCP's resources and prompts, not a caller: not listed as tools.
        const modules = withoutSeatTools(await source.catalogue());
        context.stdout.write(
          options.json === true
            ? `${JSON.stringify(modules, null, 2)}\n`
            : formatModules(modules, createPaint(context.stdout)),
        );
        const sourceErrors = source.errors?.() ?? [];
        for (const error of sourceErrors) context.stderr.write(`tackle: ${error.source}: ${error.message}\n`);
        if (sourceErrors.length > 0 && options.allowUnhealthy !== true) process.exitCode = 1;
        const unhealthy = modules.filter((info) => info.status !== "ok");
        if (unhealthy.length > 0 && options.allowUnhealthy !== true) {
          // The listing is printed in full; the exit code tells a script that it is not all well.
          context.stderr.write(
            `tackle: ${unhealthy.length} module${unhealthy.length === 1 ? "" : "s"} not ok: ${unhealthy.map((info) => `${info.module} (${info.status})`).join(", ")} (--allow-unhealthy to exit 0)\n`,
          );
          process.exitCode = 1;
        }
      } finally {
        await source.close();
      }
    },
  );
}
