/** `tackle mcp`: the same tools as the console, as an MCP server over stdio, for a program a person starts. */
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import type { Command } from "commander";
import { createMcpServer } from "../mcp/create-mcp-server.ts";
import { openToolSource } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import { sourceOptions } from "./source-options.ts";

export function addMcpCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("mcp")
    .description(
      "Answer MCP over stdio with every tool the node or mesh serves (for an MCP desktop client or an IDE); logs go to stderr",
    );
  sourceOptions(command).action(
    async (options: { console?: string; tokenFile?: string; builtin?: boolean }) => {
      const source = await openToolSource({ ...options, env: context.env, logger: context.logger });
      const ended = new Promise<string>((resolve) => {
        // The stdio binding: a server exits promptly when its client closes stdin.
        context.stdin.once("end", () => resolve("stdin closed"));
        context.stdin.once("close", () => resolve("stdin closed"));
      });
      const handle = serveStdio(() => createMcpServer(source), {
        onerror: (error) => context.logger.warn("mcp stdio error", { error: error.message }),
      });
      context.logger.info("tackle mcp ready", { source: source.description });
      const reason = await Promise.race([ended, context.stopped]);
      context.logger.debug("tackle mcp stopping", { reason });
      await handle.close();
      await source.close();
    },
  );
}
