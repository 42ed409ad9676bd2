/** The `tackle` command line: serve, mcp, tools, call, mesh. */
import { Command } from "commander";
import { addCallCommand } from "../commands/call-command.ts";
import { addMcpCommand } from "../commands/mcp-command.ts";
import { addMeshCommand } from "../commands/mesh-command.ts";
import { addServeCommand } from "../commands/serve-command.ts";
import { addToolsCommand } from "../commands/tools-command.ts";
import type { ProgramContext } from "./program-context.ts";

export const version = "0.1.0";

export function createProgram(context: ProgramContext): Command {
  const program = new Command("tackle")
    .description(
      "Tackle's node runtime and its tools: serve modules, answer MCP on loopback or stdio, list and call tools.\nConfiguration: MESH_BROKER_URL, MESH_BROKER_FILE, MESH_TOOL_MODULES, MESH_NODE, MESH_CONSOLE_LISTEN, TACKLE_HOME.",
    )
    .version(version)
    .showHelpAfterError("(add --help for usage)")
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout.write(text),
      writeErr: (text) => context.stderr.write(text),
    });
  addServeCommand(program, context);
  addMcpCommand(program, context);
  addToolsCommand(program, context);
  addCallCommand(program, context);
  addMeshCommand(program, context);
  for (const command of program.commands) command.exitOverride();
  return program;
}
