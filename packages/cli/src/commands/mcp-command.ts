/** `tackle mcp`: the same tools as the console, as an MCP server over stdio, for a program a person starts. */
import { resolve } from "node:path";
import { PassThrough } from "node:stream";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { createResultPages } from "@tackle/core/mcp";
import type { Command } from "commander";
import { CheckedStdioServerTransport } from "../mcp/checked-stdio-server-transport.ts";
import { createMcpServer } from "../mcp/create-mcp-server.ts";
import { openToolSource } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { type ApprovalFlags, approvalFlags, approvalOptions, openApprovals } from "./approval-options.ts";
import { type BoundFlags, passedBoundFlags, stdioBoundOptions } from "./bound-options.ts";
import { mcpClientConfig } from "./mcp-client-config.ts";
import { resultBudgetOption } from "./result-budget-option.ts";
import { sourceOptions } from "./source-options.ts";

export function addMcpCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("mcp")
    .description(
      "Answer MCP over stdio with every tool the node or mesh serves (for an MCP desktop client or an IDE); logs go to stderr",
    );
  command.option(
    "--print-config",
    "print the entries that start this command from common MCP clients (Claude Desktop, Cursor, VS Code, Claude Code, Inspector), and exit",
  );
  stdioBoundOptions(resultBudgetOption(approvalOptions(sourceOptions(command)))).action(
    async (options: McpFlags & { printConfig?: boolean }) => {
      if (options.printConfig === true) {
        context.stdout.write(mcpClientConfig({ env: context.env, flags: passedFlags(options) }));
        return;
      }
      const resultPages = createResultPages(
        options.resultBudget === undefined ? {} : { budget: options.resultBudget },
      );
      const opened = await openToolSource({ ...options, env: context.env, logger: context.logger });
      const { source, idle } = trackInFlight(opened);
      const approvals = await openApprovals(options, source, context.env);
      // The SDK's stdio transport closes, dropping replies still pending, the moment stdin ends; it
      // reads from a pipe that ends only once every request already read has been answered.
      const input = new PassThrough();
      context.stdin.pipe(input, { end: false });
      const ended = new Promise<string>((resolve) => {
        context.stdin.once("end", () => resolve("stdin closed"));
        context.stdin.once("close", () => resolve("stdin closed"));
      });
      const transport = new CheckedStdioServerTransport(input, context.stdout as NodeJS.WriteStream, {
        ...(options.maxInFlight === undefined ? {} : { maxInFlight: options.maxInFlight }),
        ...(options.maxWaiting === undefined ? {} : { maxWaiting: options.maxWaiting }),
      });
      const handle = serveStdio(
        () => createMcpServer(source, { resultPages, ...(approvals === undefined ? {} : { approvals }) }),
        {
          transport,
          onerror: (error) => context.logger.warn("mcp stdio error", { error: error.message }),
        },
      );
      context.logger.info("tackle mcp ready", { source: source.description });
      const reason = await Promise.race([ended, context.stopped]);
      context.logger.debug("tackle mcp stopping", { reason });
      // A signal stops at once; the end of stdin waits for the replies.
      if (reason === "stdin closed") await idle(() => transport.waiting);
      input.end();
      await handle.close();
      await approvals?.close();
      await source.close();
    },
  );
}

/** The flags `tackle mcp` takes and passes on in the entries it prints. */
type McpFlags = ApprovalFlags &
  BoundFlags & {
    console?: string;
    tokenFile?: string;
    builtin?: boolean;
    resultBudget?: number;
  };

/** The flags given here, as the printed entries pass them on. */
function passedFlags(options: McpFlags): string[] {
  return [
    ...(options.console === undefined ? [] : ["--console", options.console]),
    ...(options.tokenFile === undefined ? [] : ["--token-file", resolve(options.tokenFile)]),
    ...(options.builtin === true ? ["--builtin"] : []),
    ...(options.resultBudget === undefined ? [] : ["--result-budget", String(options.resultBudget)]),
    ...passedBoundFlags(options),
    ...approvalFlags(options),
  ];
}

/**
 * The source, counting its listings and calls in flight; `idle(waiting)` resolves once none has run
 * for a moment and no request waits for a place (the reply of the last one written to stdout by then).
 */
function trackInFlight(source: ToolSource): {
  source: ToolSource;
  idle: (waiting: () => number) => Promise<void>;
} {
  let running = 0;
  const track = async <T>(work: () => Promise<T>): Promise<T> => {
    running += 1;
    try {
      return await work();
    } finally {
      running -= 1;
    }
  };
  const quiet = () => new Promise((resolve) => setTimeout(resolve, 50));
  return {
    source: {
      description: source.description,
      catalogue: () => track(() => source.catalogue()),
      // What is wrong with the source itself (the broker unreachable): `tackle.modules` says it once.
      ...(source.errors === undefined ? {} : { errors: () => source.errors?.() ?? [] }),
      call: (name, args, options) => track(() => source.call(name, args, options)),
      close: () => source.close(),
    },
    async idle(waiting) {
      // Messages read just before the end may still be on their way to a handler: settle first.
      await quiet();
      while (running > 0 || waiting() > 0) {
        while (running > 0 || waiting() > 0) await quiet();
        await quiet();
      }
    },
  };
}
