/** The options `tools`, `call` and `mcp` share: where the tools come from. */
import type { Command } from "commander";

export function sourceOptions(command: Command): Command {
  return command
    .option(
      "--console <url>",
      "go through a console already on this machine (e.g. http://127.0.0.1:4270/mcp); no credential needed",
    )
    .option(
      "--token-file <path>",
      "the console's token file (default $TACKLE_HOME/console-token; or set TACKLE_CONSOLE_TOKEN)",
    )
    .option(
      "--builtin",
      "also load the built-in modules (loaded anyway when no broker and no MESH_TOOL_MODULES is set)",
    );
}
