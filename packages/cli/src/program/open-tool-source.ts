/** Picks where tools come from: a console (`--console`), the mesh (a broker is configured) or this process. */
import type { Logger } from "@tackle/core";
import {
  createMeshClient,
  loadMeshConfig,
  loadModules,
  type MeshConfig,
  MeshConfigError,
  redactBrokerUrl,
} from "@tackle/mesh";
import { consoleTokenPath } from "../config/tackle-home.ts";
import { readConsoleToken } from "../console/console-token.ts";
import { builtinModules, type ModuleEntry } from "../modules/builtin-modules.ts";
import { createConsoleToolSource } from "../tool-source/create-console-tool-source.ts";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import { createMeshToolSource } from "../tool-source/create-mesh-tool-source.ts";
import type { ModuleInfo, ToolSource } from "../tool-source/tool-source.ts";
import { CliError } from "./cli-error.ts";

export interface SourceOptions {
  readonly console?: string;
  readonly tokenFile?: string;
  /** Serve the built-in modules besides MESH_TOOL_MODULES (they are served anyway when it is unset). */
  readonly builtin?: boolean;
  readonly env: NodeJS.ProcessEnv;
  readonly logger: Logger;
}

/** Reads the MESH_* configuration, turning a malformed variable into a one-line refusal. */
export function readMeshConfig(env: NodeJS.ProcessEnv): MeshConfig {
  try {
    return loadMeshConfig(env);
  } catch (error) {
    if (MeshConfigError.isInstance(error)) {
      throw new CliError("invalid_configuration", error.message, { cause: error, exitCode: 2 });
    }
    throw error;
  }
}

/** MESH_TOOL_MODULES, plus the built-ins when asked or when nothing else is configured. */
export function modulesToServe(config: MeshConfig, builtin: boolean | undefined): ModuleEntry[] {
  const configured = [...config.modules];
  if (builtin === true || configured.length === 0) {
    const named = new Set(configured.map((entry) => entry.module));
    configured.push(...builtinModules().filter((entry) => !named.has(entry.module)));
  }
  return configured;
}

export function hasBroker(config: MeshConfig): boolean {
  return config.brokerUrl !== undefined || config.brokerFile !== undefined;
}

export async function openMeshSource(
  config: MeshConfig,
  /** This node's own modules (from its runtime), listed while the broker is unreachable. */
  local?: () => readonly ModuleInfo[],
): Promise<ToolSource> {
  const client = await withBroker(config, () =>
    createMeshClient({
      ...(config.brokerUrl === undefined ? {} : { servers: config.brokerUrl }),
      ...(config.brokerFile === undefined ? {} : { credsFile: config.brokerFile }),
    }),
  );
  try {
    await requireJetStream(client.connection, config);
  } catch (error) {
    await client.close().catch(() => {});
    throw error;
  }
  // The description reaches logs and every MCP client's instructions: never a broker password.
  const broker = config.brokerUrl === undefined ? undefined : redactBrokerUrl(config.brokerUrl);
  return createMeshToolSource(
    client,
    broker ?? config.brokerFile ?? "",
    local === undefined ? {} : { local },
  );
}

/** The broker as a person reads it: its URL without a password, or the credential file's broker. */
function brokerName(config: MeshConfig): string {
  return config.brokerUrl !== undefined
    ? redactBrokerUrl(config.brokerUrl)
    : `the broker of ${config.brokerFile ?? ""}`;
}

/** True for an error that says the broker runs without JetStream. */
export function isNoJetStream(error: unknown): boolean {
  return (error as Error)?.name === "JetStreamNotEnabled" || /jetstream is not enabled/i.test(String(error));
}

/** The one line for a broker without JetStream, where the mesh keeps its memberships and catalogue. */
export function noJetStream(config: MeshConfig, cause: unknown): CliError {
  return new CliError(
    "broker_unavailable",
    `The broker at ${brokerName(config)} has no JetStream, where the mesh keeps its memberships and catalogue: start nats-server with -js (--jetstream)`,
    { cause },
  );
}

/**
 * Asks the broker for JetStream once: without it no node can hold a membership, and a listing would
 * answer "No modules." for a broker that is only misconfigured.
 */
export async function requireJetStream(
  connection: { request(subject: string, payload: string, options: { timeout: number }): Promise<unknown> },
  config: MeshConfig,
): Promise<void> {
  try {
    await connection.request("$JS.API.INFO", "", { timeout: 2000 });
  } catch (error) {
    // Only "no responders" means no JetStream; a slow answer is left to the listing's own deadlines.
    if (/no responders/i.test(String((error as Error)?.message))) throw noJetStream(config, error);
  }
}

/** Runs a first contact with the broker, turning a refused connection into a one-line refusal that names it. */
export async function withBroker<T>(config: MeshConfig, connect: () => Promise<T>): Promise<T> {
  try {
    return await connect();
  } catch (error) {
    if (CliError.isInstance(error) || MeshConfigError.isInstance(error)) throw error;
    if (isNoJetStream(error)) throw noJetStream(config, error);
    const where =
      config.brokerUrl !== undefined
        ? `${redactBrokerUrl(config.brokerUrl)} (MESH_BROKER_URL)`
        : `the broker of ${config.brokerFile} (MESH_BROKER_FILE)`;
    throw new CliError("broker_unavailable", `Cannot reach ${where}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

export async function openEmbeddedSource(
  entries: readonly ModuleEntry[],
  logger: Logger,
): Promise<ToolSource> {
  const loaded = await loadModules(entries, { logger });
  for (const module of loaded) {
    for (const error of module.errors)
      logger.error("bundle failed to load", { module: module.module, ...error });
  }
  return createEmbeddedToolSource(loaded);
}

/** The source for `tools`, `call` and `mcp`. */
export async function openToolSource(options: SourceOptions): Promise<ToolSource> {
  if (options.console !== undefined) {
    const token =
      options.env.TACKLE_CONSOLE_TOKEN ?? readTokenFor(options.console, options.tokenFile, options.env);
    return createConsoleToolSource({ url: options.console, token });
  }
  const config = readMeshConfig(options.env);
  if (hasBroker(config)) return openMeshSource(config);
  return openEmbeddedSource(modulesToServe(config, options.builtin), options.logger);
}

/** The console's token for `--console`; no file is told as the console not started with this home. */
function readTokenFor(url: string, tokenFile: string | undefined, env: NodeJS.ProcessEnv): string {
  const path = tokenFile ?? consoleTokenPath(env);
  try {
    return readConsoleToken(path);
  } catch (error) {
    if ((error as { cause?: NodeJS.ErrnoException }).cause?.code !== "ENOENT") throw error;
    throw new CliError(
      "token_file",
      `No console token file at ${path}, so ${url} cannot be asked: start the console first (tackle serve, or npm start, creates the file), with the same TACKLE_HOME; or pass --token-file <path> or set TACKLE_CONSOLE_TOKEN`,
      { cause: error },
    );
  }
}
