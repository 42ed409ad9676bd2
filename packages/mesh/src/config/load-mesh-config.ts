/** `loadMeshConfig`: the node runtime's configuration from its MESH_* variables. */
import { hostname } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import type { CallLimits } from "../runtime/admission.ts";
import { moduleNamePattern, nodeNamePattern } from "./names.ts";
import { type ListenAddress, parseListenAddress } from "./parse-listen.ts";
import { readCredential } from "./read-credential.ts";
import { redactBrokerUrl } from "./redact-broker-url.ts";

/** One bundle to load: the module it belongs to and its entrypoint (a JS module or an executable). */
export interface ModuleEntry {
  readonly module: string;
  readonly path: string;
}

export interface MeshConfig {
  /** This machine's name (MESH_NODE; default: the host name, made a valid token). */
  readonly node: string;
  /** The node's NATS credentials file (MESH_BROKER_FILE). */
  readonly brokerFile?: string;
  /** NATS server URL(s), comma-separated (MESH_BROKER_URL); alone, the bootstrap connection. */
  readonly brokerUrl?: string;
  /** The bundles to serve (MESH_TOOL_MODULES), in order. */
  readonly modules: readonly ModuleEntry[];
  /** Whose machine this is (MESH_OPERATOR_ACCOUNT), handed to tools. */
  readonly operatorAccount?: string;
  /** Where their home is (MESH_OPERATOR_HOME), handed to tools. */
  readonly operatorHome?: string;
  /** Where the console answers (MESH_CONSOLE_LISTEN, default 127.0.0.1:4270; loopback only). */
  readonly consoleListen: ListenAddress;
  /**
   * How many of one module's calls run at once on this node (MESH_CALLS_CONCURRENT, default 256) and
   * wait their turn (MESH_CALLS_WAITING, default 1,024); ADR 0214.
   */
  readonly calls?: CallLimits;
}

/** Reads and checks every MESH_* variable; a malformed one throws a MeshConfigError naming it. */
export function loadMeshConfig(env: NodeJS.ProcessEnv = process.env): MeshConfig {
  const node = parseNode(env.MESH_NODE);
  const brokerFile = nonEmpty(env.MESH_BROKER_FILE);
  const brokerUrl = nonEmpty(env.MESH_BROKER_URL);
  if (brokerUrl !== undefined) checkBrokerUrl(brokerUrl);
  let credentialName: string | undefined;
  if (brokerFile !== undefined) credentialName = readCredential(brokerFile).name;
  const modules = parseModules(env.MESH_TOOL_MODULES, brokerFile, credentialName);
  const operatorAccount = nonEmpty(env.MESH_OPERATOR_ACCOUNT);
  const operatorHome = nonEmpty(env.MESH_OPERATOR_HOME);
  if (operatorHome !== undefined && !isAbsolute(operatorHome)) {
    throw new MeshConfigError(
      "MESH_OPERATOR_HOME",
      `must be an absolute path, got ${JSON.stringify(operatorHome)}`,
    );
  }
  const consoleListen = parseListenAddress(env.MESH_CONSOLE_LISTEN);
  const concurrent = parseCount(env, "MESH_CALLS_CONCURRENT", 1);
  const waiting = parseCount(env, "MESH_CALLS_WAITING", 0);
  const calls: CallLimits = {
    ...(concurrent === undefined ? {} : { concurrent }),
    ...(waiting === undefined ? {} : { waiting }),
  };
  return {
    node,
    ...(brokerFile === undefined ? {} : { brokerFile }),
    ...(brokerUrl === undefined ? {} : { brokerUrl }),
    modules,
    ...(operatorAccount === undefined ? {} : { operatorAccount }),
    ...(operatorHome === undefined ? {} : { operatorHome }),
    consoleListen,
    ...(Object.keys(calls).length === 0 ? {} : { calls }),
  };
}

/** A whole number of calls, at least `least`, or undefined when the variable is not set. */
function parseCount(env: NodeJS.ProcessEnv, variable: string, least: number): number | undefined {
  const given = nonEmpty(env[variable]);
  if (given === undefined) return undefined;
  const count = Number(given);
  if (!/^\d+$/.test(given) || !Number.isSafeInteger(count) || count < least) {
    throw new MeshConfigError(
      variable,
      `must be a whole number of calls, at least ${least}; got ${JSON.stringify(given)}`,
    );
  }
  return count;
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === "" ? undefined : trimmed;
}

function parseNode(value: string | undefined): string {
  const given = nonEmpty(value);
  if (given === undefined) {
    // The host name may hold dots or other characters a subject token cannot.
    return (
      hostname()
        .replace(/[^A-Za-z0-9_-]/g, "-")
        .slice(0, 64) || "node"
    );
  }
  if (!nodeNamePattern.test(given)) {
    throw new MeshConfigError(
      "MESH_NODE",
      `${JSON.stringify(given)} is not a node name (^[A-Za-z0-9_-]{1,64}$)`,
    );
  }
  return given;
}

const brokerProtocols = new Set(["nats:", "tls:", "ws:", "wss:"]);

function checkBrokerUrl(value: string): void {
  for (const server of value.split(",")) {
    const trimmed = server.trim();
    const withScheme = trimmed.includes("://") ? trimmed : `nats://${trimmed}`;
    let url: URL;
    try {
      url = new URL(withScheme);
    } catch (error) {
      throw new MeshConfigError(
        "MESH_BROKER_URL",
        `${JSON.stringify(redactBrokerUrl(trimmed))} is not a URL`,
        {
          cause: error,
        },
      );
    }
    if (!brokerProtocols.has(url.protocol) || url.hostname === "") {
      throw new MeshConfigError(
        "MESH_BROKER_URL",
        `${JSON.stringify(redactBrokerUrl(trimmed))} is not a NATS server URL (nats://host:port, tls://, ws:// or wss://)`,
      );
    }
  }
}

function parseModules(
  value: string | undefined,
  brokerFile: string | undefined,
  credentialName: string | undefined,
): ModuleEntry[] {
  const given = nonEmpty(value);
  if (given === undefined) return [];
  const entries: ModuleEntry[] = [];
  for (const [index, raw] of given.split(",").entries()) {
    const item = raw.trim();
    if (item === "") {
      throw new MeshConfigError(
        "MESH_TOOL_MODULES",
        `entry ${index + 1} is empty (entries are module=/path, comma-separated)`,
      );
    }
    const equals = item.indexOf("=");
    // A path may itself hold "="; only a valid module name before the first one makes it a named entry.
    const named = equals > 0 && !item.slice(0, equals).includes("/");
    if (named) {
      const module = item.slice(0, equals).trim();
      const path = item.slice(equals + 1).trim();
      if (!moduleNamePattern.test(module)) {
        throw new MeshConfigError(
          "MESH_TOOL_MODULES",
          `entry ${JSON.stringify(item)}: ${JSON.stringify(module)} is not a module name (^[A-Za-z0-9_-]{1,64}$)`,
        );
      }
      if (path === "")
        throw new MeshConfigError("MESH_TOOL_MODULES", `entry ${JSON.stringify(item)} has no path`);
      entries.push({ module, path: resolve(path) });
      continue;
    }
    if (brokerFile === undefined) {
      throw new MeshConfigError(
        "MESH_TOOL_MODULES",
        `entry ${JSON.stringify(item)} is a bare path, which belongs to the credential's own module, but MESH_BROKER_FILE is not set; write module=${item}`,
      );
    }
    if (credentialName === undefined || !moduleNamePattern.test(credentialName)) {
      throw new MeshConfigError(
        "MESH_TOOL_MODULES",
        `entry ${JSON.stringify(item)} is a bare path, but the credential in MESH_BROKER_FILE names no valid module (its JWT name is ${JSON.stringify(credentialName)}); write module=${item}`,
      );
    }
    entries.push({ module: credentialName, path: resolve(item) });
  }
  return entries;
}
