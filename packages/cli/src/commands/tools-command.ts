/** `tackle tools`: every module with its status and tools; `--json` for machines. */
import type { Command } from "commander";
import { createPaint } from "../output/colour.ts";
import { formatModules } from "../output/format-modules.ts";
import { openToolSource } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import { sourceOptions } from "./source-options.ts";

export function addToolsCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("tools")
    .description("List every module with its status (ok, failed, unreachable) and its tools")
    .option("--json", "print the catalogue as JSON (module, status, node, tools with schemas, errors)");
  sourceOptions(command).action(async (options: { json?: boolean; console?: string; tokenFile?: string }) => {
    const source = await openToolSource({ ...options, env: context.env, logger: context.logger });
    try {
      const modules = await source.catalogue();
      context.stdout.write(
        options.json === true
          ? `${JSON.stringify(modules, null, 2)}\n`
          : formatModules(modules, createPaint(context.stdout)),
      );
    } finally {
      await source.close();
    }
  });
}
