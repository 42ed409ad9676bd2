/**
 * `loadModules`: every configured bundle, imported or launched, merged into one tool set per module.
 * A bundle that fails is named in the module's errors and the others serve; usable without NATS.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  type AnyTool,
  createToolSet,
  defineTool,
  jsonSchema,
  type Logger,
  silentLogger,
  type ToolContext,
  type ToolSet,
} from "@tackle/core";
import type { ModuleEntry } from "../config/load-mesh-config.ts";
import { RESERVED_TOOL_NAME, toolSubjectPattern } from "../config/names.ts";
import { bundleKind } from "./bundle-kind.ts";
import { importBundle } from "./import-bundle.ts";
import { type ChildToolListing, StdioChild, type StdioChildOptions } from "./stdio-child.ts";

/** A load problem, named by where it comes from (a bundle's path, or `path: tool`). */
export interface LoadError {
  readonly source: string;
  readonly message: string;
}

export interface LoadedModule {
  readonly module: string;
  /** The module's tools under their bare names (`echo`, `ledger.append`). */
  readonly toolset: ToolSet;
  readonly errors: readonly LoadError[];
  /**
   * The bundle's identity: `sha256:` of its entry files' contents (in configuration order). Two nodes
   * offering one module must offer the same digest.
   */
  readonly digest: string;
  /** Closes the bundles' resources and stops the module's children. */
  close(): Promise<void>;
}

export interface LoadModulesOptions {
  readonly logger?: Logger;
  /** The environment bundles see: the only variables a child gets besides the SDK's safe base. */
  readonly env?: Readonly<Record<string, string>>;
  /** This node's name, handed to bundle functions. */
  readonly node?: string;
  /** Default per-call time limit of every module's tool set. */
  readonly timeoutMs?: number;
  readonly child?: Pick<StdioChildOptions, "maxInFlight" | "handshakeTimeoutMs" | "restartBackoff">;
  /** Time a JavaScript bundle may take to import and hand over its tools. Default 30 s. */
  readonly importTimeoutMs?: number;
}

export { RESERVED_TOOL_NAME } from "../config/names.ts";

interface EntryOutcome {
  readonly entry: ModuleEntry;
  readonly tools: readonly AnyTool[];
  readonly error?: string;
  readonly close?: () => Promise<void>;
}

export async function loadModules(
  entries: readonly ModuleEntry[],
  options: LoadModulesOptions = {},
): Promise<LoadedModule[]> {
  const logger = options.logger ?? silentLogger;
  const outcomes = await Promise.all(entries.map((entry) => loadEntry(entry, options, logger)));
  const modules = [...new Set(entries.map((entry) => entry.module))];
  return modules.map((module) => ({
    ...merge(
      module,
      outcomes.filter((outcome) => outcome.entry.module === module),
      options,
      logger,
    ),
    digest: bundleDigest(entries.filter((entry) => entry.module === module).map((entry) => entry.path)),
  }));
}

/** `sha256:` over each entry file's contents; an unreadable file counts by its path (its load failed anyway). */
export function bundleDigest(paths: readonly string[]): string {
  const hash = createHash("sha256");
  for (const path of paths) {
    try {
      hash.update(readFileSync(path));
    } catch {
      hash.update(`unreadable:${path}`);
    }
    hash.update("\0");
  }
  return `sha256:${hash.digest("hex")}`;
}

async function loadEntry(
  entry: ModuleEntry,
  options: LoadModulesOptions,
  logger: Logger,
): Promise<EntryOutcome> {
  const env = {
    ...(options.env ?? {}),
    MESH_MODULE: entry.module,
    ...(options.node === undefined ? {} : { MESH_NODE: options.node }),
  };
  try {
    const kind = bundleKind(entry.path);
    if (kind.kind === "import") {
      const bundle = await withDeadline(
        importBundle(entry.path, {
          module: entry.module,
          node: options.node ?? "",
          env: Object.freeze({ ...env }),
          logger,
        }),
        options.importTimeoutMs ?? 30_000,
      );
      return { entry, tools: bundle.tools, ...(bundle.close === undefined ? {} : { close: bundle.close }) };
    }
    const child = new StdioChild({
      command: kind.command,
      args: kind.args,
      env,
      source: entry.path,
      logger,
      ...options.child,
    });
    try {
      const listed = await child.listTools();
      const tools: AnyTool[] = [];
      const problems: string[] = [];
      for (const listing of listed) {
        if (listing.needsTasks) {
          problems.push(
            `Tool "${listing.name}" (${entry.path}) answers only task-augmented calls (execution.taskSupport "required"), which the mesh does not send; not served`,
          );
          continue;
        }
        try {
          tools.push(childTool(child, listing, entry.path));
        } catch (error) {
          problems.push((error as Error).message);
        }
      }
      return {
        entry,
        tools,
        ...(problems.length === 0 ? {} : { error: problems.join("; ") }),
        close: () => child.close(),
      };
    } catch (error) {
      await child.close();
      throw error;
    }
  } catch (error) {
    const message = (error as Error)?.message ?? String(error);
    logger.error("bundle failed to load; the module's other bundles still serve", {
      module: entry.module,
      source: entry.path,
      error: message,
    });
    return { entry, tools: [], error: message };
  }
}

/** A child's listed tool as a tool of the module: each call goes to the child. */
function childTool(child: StdioChild, listing: ChildToolListing, source: string): AnyTool {
  // The child is asked for progress (a token on its request) only when someone receives it.
  const call = (args: unknown, context: ToolContext) =>
    child.call(
      listing.name,
      args,
      context.signal,
      context.progressWanted
        ? (update) => context.progress(update.progress, update.total, update.message)
        : undefined,
      // The call's idempotency key, the same on a repeat: a child makes its effect once by it. On a
      // takeover (its earlier run's node died mid-call) the child is told so (ADR 0213).
      {
        "tackle/idempotencyKey": context.idempotencyKey,
        ...(context.takeover === undefined ? {} : { "tackle/takeover": context.takeover }),
      },
    );
  return defineTool({
    name: listing.name,
    description: listing.description,
    input: jsonSchema(listing.inputSchema),
    source,
    ...(listing.annotations === undefined ? {} : { annotations: listing.annotations }),
    execute: call,
    // A child that declared `tackle/recovers` looks its earlier run up itself, in the one call it is
    // sent with `tackle/takeover`: what it answers is the key's outcome.
    ...(listing.recovers
      ? {
          recover: async (args: unknown, context: ToolContext) => ({
            landed: true,
            output: await call(args, context),
          }),
        }
      : {}),
  });
}

function merge(
  module: string,
  outcomes: readonly EntryOutcome[],
  options: LoadModulesOptions,
  logger: Logger,
): Omit<LoadedModule, "digest"> {
  const errors: LoadError[] = [];
  const accepted: AnyTool[] = [];
  for (const outcome of outcomes) {
    if (outcome.error !== undefined) errors.push({ source: outcome.entry.path, message: outcome.error });
    for (const tool of outcome.tools) {
      const refusal =
        tool.name === RESERVED_TOOL_NAME || tool.name.startsWith(`${RESERVED_TOOL_NAME}.`)
          ? `Tool name "${tool.name}" is reserved for the module's listing and control (${tool.source}); refused`
          : !toolSubjectPattern.test(tool.name)
            ? `Tool name "${tool.name}" (${tool.source}) cannot be a NATS subject: dot-separated, non-empty parts; refused`
            : duplicateOf(accepted, tool);
      if (refusal === undefined) {
        accepted.push(tool);
        continue;
      }
      errors.push({ source: tool.source, message: refusal });
      logger.error("tool refused at load", { module, source: tool.source, error: refusal });
    }
  }
  const toolset = createToolSet(accepted, {
    logger,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
  const closers = outcomes.flatMap((outcome) => (outcome.close === undefined ? [] : [outcome.close]));
  return {
    module,
    toolset,
    errors,
    async close() {
      const results = await Promise.allSettled(closers.map((close) => close()));
      for (const result of results) {
        if (result.status === "rejected") {
          logger.error("bundle close failed", {
            module,
            error: (result.reason as Error)?.message ?? String(result.reason),
          });
        }
      }
    },
  };
}

/** core's createToolSet is what refuses duplicates, naming both definitions' sources. */
function duplicateOf(accepted: readonly AnyTool[], tool: AnyTool): string | undefined {
  try {
    createToolSet([...accepted, tool]);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** A bundle that never finishes loading (a top-level await on a dead service) must not hold the node. */
async function withDeadline<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`did not finish loading within ${timeoutMs} ms; the module's other bundles serve`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
