/** `tackle serve`: the node runtime (or, with no broker, the embedded modules) plus the loopback console. */

import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "@tackle/core";
import { MeshConfigError, parseListenAddress, startNodeRuntime } from "@tackle/mesh";
import type { Command } from "commander";
import { consoleTokenPath, tackleHome } from "../config/tackle-home.ts";
import { ensureConsoleToken } from "../console/console-token.ts";
import { durableUrlProblem } from "../console/durable-url.ts";
import { type RunningConsole, startConsole } from "../console/start-console.ts";
import { isSeatTool } from "../mcp/module-contributions.ts";
import { CliError } from "../program/cli-error.ts";
import {
  hasBroker,
  modulesToServe,
  openEmbeddedSource,
  openMeshSource,
  readMeshConfig,
  withBroker,
} from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import type { ModuleInfo, ToolSource } from "../tool-source/tool-source.ts";
import { type ApprovalFlags, approvalOptions, openApprovals } from "./approval-options.ts";
import { type BoundFlags, consoleBoundOptions } from "./bound-options.ts";
import { resultBudgetOption } from "./result-budget-option.ts";

interface ServeOptions extends ApprovalFlags, BoundFlags {
  listen?: string;
  tokenFile?: string;
  builtin?: boolean;
  console: boolean;
  resultBudget?: number;
  durableUrl?: string;
}

export function addServeCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("serve")
    .description(
      "Serve this node's modules and answer MCP on loopback (the console). With MESH_BROKER_URL or MESH_BROKER_FILE it joins the mesh; without, it serves its modules in-process.",
    )
    .option(
      "--listen <host:port>",
      "where the console answers (default MESH_CONSOLE_LISTEN or 127.0.0.1:4270); loopback only",
    )
    .option(
      "--token-file <path>",
      "the console's bearer token file, created 0600 on first start (default $TACKLE_HOME/console-token)",
    )
    .option("--builtin", "also serve the built-in modules (served anyway when MESH_TOOL_MODULES is unset)")
    .option("--no-console", "serve the modules on the mesh without the console listener")
    .option(
      "--durable-url <url>",
      "the console's runs page shows and approves this durable HTTP server's runs instead of the demo agent's (default TACKLE_CONSOLE_DURABLE_URL); loopback only",
    );
  consoleBoundOptions(resultBudgetOption(approvalOptions(command))).action(async (options: ServeOptions) => {
    const { logger, env, stdout } = context;
    const config = readMeshConfig(env);
    const listen = options.listen === undefined ? config.consoleListen : readListenFlag(options.listen);
    const entries = modulesToServe(config, options.builtin);
    const durableUrl = options.durableUrl ?? (env.TACKLE_CONSOLE_DURABLE_URL || undefined);
    const durableProblem = durableUrl === undefined ? undefined : durableUrlProblem(durableUrl);
    if (durableProblem !== undefined)
      throw new CliError("invalid_arguments", durableProblem, { exitCode: 2 });
    requireHomeDirectory(env, logger);
    const closers: (() => Promise<void>)[] = [];
    let source: ToolSource;
    let served: readonly ModuleInfo[];
    try {
      if (hasBroker(config)) {
        const runtime = await withBroker(config, () =>
          startNodeRuntime({ config: { ...config, modules: entries }, logger }),
        );
        closers.unshift(() => runtime.close());
        served = runtime.modules();
        if (!options.console) {
          printServed(stdout, `mesh node ${config.node}`, served, undefined, undefined);
          await waitAndClose(context, closers);
          return;
        }
        source = await openMeshSource(config, () => runtime.modules());
      } else {
        if (!options.console) {
          throw new CliError(
            "invalid_arguments",
            "--no-console needs a broker (MESH_BROKER_URL or MESH_BROKER_FILE): without one nothing would be served",
            { exitCode: 2 },
          );
        }
        source = await openEmbeddedSource(entries, logger);
        served = await source.catalogue();
      }
      closers.unshift(() => source.close());
      const tokenPath = options.tokenFile ?? consoleTokenPath(env);
      const token = ensureConsoleToken(tokenPath);
      if (token.created) logger.info("console token created", { path: tokenPath });
      const approvals = await openApprovals(options, source, env);
      const running: RunningConsole = await startConsole({
        source,
        listen,
        token: token.token,
        tokenFile: resolve(tokenPath),
        logger,
        runsStore: join(tackleHome(env), "console-runs.sqlite"),
        ...(durableUrl === undefined ? {} : { durableUrl }),
        ...(options.resultBudget === undefined ? {} : { resultBudget: options.resultBudget }),
        ...(options.maxInFlight === undefined ? {} : { maxInFlight: options.maxInFlight }),
        ...(options.maxStreams === undefined ? {} : { maxStreams: options.maxStreams }),
        ...(approvals === undefined ? {} : { approvals }),
      });
      closers.unshift(() => running.close());
      printServed(
        stdout,
        hasBroker(config) ? `mesh node ${config.node}` : "embedded (no broker configured)",
        served,
        running.url,
        tokenPath,
        running.signInUrl,
      );
    } catch (error) {
      await closeAll(closers, context);
      throw error;
    }
    await waitAndClose(context, closers);
  });
}

/** `--listen` by the same rules as MESH_CONSOLE_LISTEN, refused the same way. */
function readListenFlag(value: string) {
  try {
    return parseListenAddress(value, "--listen");
  } catch (error) {
    if (!MeshConfigError.isInstance(error)) throw error;
    throw new CliError("invalid_listen", error.message, { cause: error, exitCode: 2 });
  }
}

function printServed(
  stdout: NodeJS.WritableStream,
  mode: string,
  served: readonly ModuleInfo[],
  url: string | undefined,
  tokenPath: string | undefined,
  signInUrl?: string,
): void {
  const lines = [`tackle serve: ${mode}`];
  for (const info of served) {
    const errors =
      info.errors.length === 0
        ? ""
        : `, ${info.errors.length} failed: ${info.errors.map((error) => `${error.source}: ${error.message}`).join("; ")}`;
    // The `mcp` seat's verbs are how a module contributes prompts and resources, not tools a user calls.
    const tools = info.tools.filter((tool) => !isSeatTool(tool.name)).length;
    lines.push(`  module ${info.module}: ${info.status}, ${tools} tool${tools === 1 ? "" : "s"}${errors}`);
  }
  if (served.length === 0) lines.push("  no modules");
  if (url !== undefined) {
    lines.push(`console ${url}`);
    // The web page: open this once in a browser (the code works once; after that, sign in with the token).
    if (signInUrl !== undefined) lines.push(`sign in ${signInUrl}`);
    lines.push(`token file ${tokenPath}`);
  }
  stdout.write(`${lines.join("\n")}\n`);
}

async function waitAndClose(context: ProgramContext, closers: (() => Promise<void>)[]): Promise<void> {
  const signal = await context.stopped;
  context.logger.info("stopping", { signal });
  await closeAll(closers, context);
}

async function closeAll(closers: readonly (() => Promise<void>)[], context: ProgramContext): Promise<void> {
  for (const close of closers) {
    try {
      await close();
    } catch (error) {
      context.logger.error("close failed", { error: (error as Error).message });
    }
  }
}

/**
 * Refuses a `$TACKLE_HOME` (or `~/.tackle`) that exists and is not a folder before anything opens a
 * store in it: otherwise each store fails on its own with ENOTDIR or EEXIST.
 */
function requireHomeDirectory(env: NodeJS.ProcessEnv, logger: Logger): void {
  const home = tackleHome(env);
  let isDirectory: boolean;
  let mode: number;
  try {
    const stat = statSync(home);
    isDirectory = stat.isDirectory();
    mode = stat.mode & 0o777;
  } catch {
    return; // absent: created on first use, 0700
  }
  // Stores made by earlier versions kept the umask's modes: the memories were readable by every user.
  if (isDirectory && (mode & 0o077) !== 0) {
    logger.warn(
      `${home} is open to other users (mode ${mode.toString(8)}): it holds your memories and runs; run: chmod 700 ${home}`,
    );
  }
  if (!isDirectory) {
    throw new CliError(
      "invalid_configuration",
      `${home} is not a folder: Tackle keeps its state (the console token, stores) there. Move the file aside, or set TACKLE_HOME to a folder`,
      { exitCode: 2 },
    );
  }
}
