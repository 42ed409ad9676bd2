/**
 * Where each module answers, and what it serves: prefixes from the catalogue (with the default prefix
 * for an unissued module), one module's listing, and the whole catalogue with each module's status.
 */
import { ToolAbortedError } from "@tackle/core";
import { defaultModulePrefix } from "../config/names.ts";
import { readCatalogue } from "../membership/membership-store.ts";
import type { CatalogueRecord } from "../membership/records.ts";
import { decodeJson } from "../nats/wire.ts";
import type { ModuleInfo } from "../runtime/module-info.ts";
import type { ClientLink } from "./client-link.ts";
import { ReadDeadline, withDeadline } from "./deadline.ts";
import { discoverModules } from "./discover-modules.ts";
import type { MeshListOptions } from "./mesh-client-api.ts";
import { untilAborted } from "./until-aborted.ts";

const listingTimeoutMs = 2000;
/** How long `catalogue()` waits for the catalogue bucket before answering from what it knows. */
const catalogueReadMs = 1500;
/** How long a call waits to learn its module's prefix from the catalogue before using the default. */
export const catalogueTimeoutMs = 5000;

export interface ModuleDirectory {
  /** The prefix last learned for `module`, without reading anything. */
  cachedPrefix(module: string): string | undefined;
  /** Where `module` answers; `refresh` reads the catalogue again. */
  prefixOf(module: string, refresh?: boolean, signal?: AbortSignal): Promise<string>;
  tools(module: string, signal?: AbortSignal): Promise<ModuleInfo>;
  catalogue(options?: MeshListOptions): Promise<ModuleInfo[]>;
}

/** What the directory knows, shared by the functions below. */
interface Directory {
  readonly link: ClientLink;
  readonly options: DirectoryOptions;
  readonly prefixes: Map<string, string>;
  /** Every module this client has seen, so an outage lists them `unreachable` instead of dropping them. */
  readonly known: Set<string>;
  lastCatalogue: readonly CatalogueRecord[];
}

interface DirectoryOptions {
  readonly defaultTimeoutMs: number;
  readonly discoveryMs?: number | undefined;
}

export function createModuleDirectory(link: ClientLink, options: DirectoryOptions): ModuleDirectory {
  const directory: Directory = { link, options, prefixes: new Map(), known: new Set(), lastCatalogue: [] };
  return {
    cachedPrefix: (module) => directory.prefixes.get(module),
    prefixOf: (module, refresh, signal) => prefixOf(directory, module, refresh, signal),
    tools: (module, signal) => tools(directory, module, signal),
    catalogue: (listOptions = {}) => catalogue(directory, listOptions),
  };
}

/** Every module this client knows of, each `unreachable` with the broker's error. */
function brokerDown(directory: Directory, error: string): ModuleInfo[] {
  const { known, prefixes, link } = directory;
  return [...known].sort().map((module) => {
    const prefix = prefixes.get(module);
    return {
      module,
      status: "unreachable" as const,
      ...(prefix === undefined ? {} : { prefix }),
      tools: [],
      errors: [
        { source: `broker ${link.brokerUrl}`, message: `${error}: module "${module}" cannot be reached` },
      ],
    };
  });
}

async function prefixOf(
  directory: Directory,
  module: string,
  refresh = false,
  signal?: AbortSignal,
): Promise<string> {
  const { prefixes, link } = directory;
  const cached = prefixes.get(module);
  if (cached !== undefined && !refresh) return cached;
  // While reconnecting the catalogue cannot be read; the call itself then fails at once.
  if (link.disconnected()) return cached ?? defaultModulePrefix(module);
  let prefix = defaultModulePrefix(module);
  try {
    // A catalogue read caught by a dropped connection must not hold the call past its own deadline.
    const read = untilAborted(readCatalogue(link.connection), signal, `mesh.catalogue`);
    const record = (await withDeadline(read, catalogueTimeoutMs)).find((entry) => entry.module === module);
    if (record !== undefined) prefix = record.prefix;
  } catch (error) {
    // Too slow to read: use the default prefix this once, and read the catalogue again next time.
    if (error instanceof ReadDeadline) return cached ?? prefix;
    if (ToolAbortedError.isInstance(error)) throw error;
    // No JetStream, or no catalogue yet: the default prefix is where an unissued module answers.
  }
  prefixes.set(module, prefix);
  return prefix;
}

async function tools(
  directory: Directory,
  module: string,
  signal?: AbortSignal,
  retried = false,
): Promise<ModuleInfo> {
  const { link, options } = directory;
  if (signal?.aborted) throw new ToolAbortedError(`mesh.tools`, signal.reason);
  directory.known.add(module);
  const prefix = await prefixOf(directory, module, false, signal);
  try {
    if (link.disconnected()) throw new Error("not connected to NATS (reconnecting)");
    const listing = link.connection.request(`${prefix}.tools`, undefined, {
      timeout: Math.min(listingTimeoutMs, options.defaultTimeoutMs),
    });
    const message = await untilAborted(listing, signal, "mesh.tools");
    return decodeJson(message.data) as ModuleInfo;
  } catch (error) {
    if (ToolAbortedError.isInstance(error)) throw error;
    // A membership change may have moved the module: read where it answers now, and ask there once.
    if (!retried && !link.disconnected() && (await prefixOf(directory, module, true, signal)) !== prefix)
      return tools(directory, module, signal, true);
    return {
      module,
      status: "unreachable",
      prefix,
      tools: [],
      errors: [
        {
          source: `${prefix}.tools`,
          message: `no runtime answered for module "${module}": ${(error as Error).message}`,
        },
      ],
    };
  }
}

/** The catalogue's modules and refusals, or (too slow this time) the last read's. */
async function readListed(directory: Directory, signal: AbortSignal | undefined) {
  const { prefixes, link } = directory;
  const modules = new Set<string>();
  const refusals = new Map<string, NonNullable<CatalogueRecord["refused"]>>();
  try {
    // A broker that died without the connection noticing yet must not hold the listing.
    const read = untilAborted(
      readCatalogue(link.connection, { onInvalid: () => {} }),
      signal,
      "mesh.catalogue",
    );
    const records = await withDeadline(read, catalogueReadMs);
    // The catalogue is the record of prefixes: a module that left it answers on its default again.
    for (const module of [...prefixes.keys()]) {
      if (!records.some((record) => record.module === module)) prefixes.delete(module);
    }
    for (const record of records) {
      modules.add(record.module);
      prefixes.set(record.module, record.prefix);
      if (record.refused !== undefined) refusals.set(record.module, record.refused);
    }
    directory.lastCatalogue = records;
  } catch (error) {
    if (ToolAbortedError.isInstance(error)) throw error;
    // Too slow this time: the last catalogue read stands in (its modules stay listed). Without
    // JetStream there is no catalogue at all; discovery still finds what answers.
    if (error instanceof ReadDeadline) {
      for (const record of directory.lastCatalogue) {
        modules.add(record.module);
        if (record.refused !== undefined) refusals.set(record.module, record.refused);
      }
    }
  }
  return { modules, refusals };
}

/** The whole catalogue, each module with its listing or its status, and the nodes refused under it. */
async function catalogue(directory: Directory, listOptions: MeshListOptions): Promise<ModuleInfo[]> {
  const { link, options } = directory;
  const signal = listOptions.signal;
  if (signal?.aborted) throw new ToolAbortedError("mesh.catalogue", signal.reason);
  const before = link.broker();
  if (!before.connected) return brokerDown(directory, before.error ?? "unreachable");
  const { modules, refusals } = await readListed(directory, signal);
  const after = link.broker();
  if (!after.connected) return brokerDown(directory, after.error ?? "unreachable");
  const discovery = discoverModules(link.connection, options.discoveryMs ?? 250);
  for (const module of await untilAborted(discovery, signal, "mesh.catalogue")) modules.add(module);
  const listed = await Promise.all([...modules].sort().map((module) => tools(directory, module, signal)));
  const last = link.broker();
  if (!last.connected) return brokerDown(directory, last.error ?? "unreachable");
  // A node refused for offering another bundle under the module is named beside it.
  return listed.map((info) => {
    const refused = refusals.get(info.module);
    if (refused === undefined) return info;
    const named = Object.entries(refused).map(([node, what]) => ({
      source: `node ${node}`,
      message: `node ${node} offers another bundle (${what.digest}) than the one the mesh serves${info.digest === undefined ? "" : ` (${info.digest})`}: refused, not merged`,
    }));
    return { ...info, errors: [...info.errors, ...named] };
  });
}
