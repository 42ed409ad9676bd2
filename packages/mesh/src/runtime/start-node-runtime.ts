/**
 * `startNodeRuntime`: the node's one process. It connects the bus, loads every configured bundle,
 * serves each module where its membership puts it, and re-serves when the membership changes.
 */
import { randomUUID } from "node:crypto";
import type { KvWatchEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type Logger, silentLogger } from "@tackle/core";
import { type LoadedModule, type LoadModulesOptions, loadModules } from "../bundles/load-modules.ts";
import type { MeshConfig } from "../config/load-mesh-config.ts";
import { defaultModulePrefix } from "../config/names.ts";
import {
  listMemberships,
  type MeshBuckets,
  noteBundle,
  openMeshBuckets,
  readCatalogue,
} from "../membership/membership-store.ts";
import { checkMembership, MEMBERSHIP_BUCKET, membershipKey } from "../membership/records.ts";
import { connectMesh } from "../nats/connect-mesh.ts";
import { decodeJson } from "../nats/wire.ts";
import { type CallLedger, createCallLedger } from "./call-ledger.ts";
import { childEnvironment } from "./child-environment.ts";
import { describeModule, type ModuleInfo } from "./module-info.ts";
import { createResultsLedger, type ResultsLedger, type ResultsLedgerOptions } from "./results-ledger.ts";
import { type Placement, type ServedModule, serveModule } from "./serve-module.ts";

export interface NodeRuntime {
  readonly node: string;
  /** Each module this node serves, with where it answers now. */
  modules(): ModuleInfo[];
  /** Stops serving, closes the bundles and children, and closes the connection it opened. */
  close(): Promise<void>;
}

export interface StartNodeRuntimeOptions {
  readonly config: MeshConfig;
  readonly logger?: Logger;
  /** A connection to use instead of one made from the config; the runtime leaves it open on close. */
  readonly connection?: NatsConnection;
  /** Passed to loadModules (per-call time limit, child limits). */
  readonly load?: Pick<LoadModulesOptions, "timeoutMs" | "child">;
  /** Each module's results ledger for calls under an idempotency key (ADR 0210): TTL and bound. */
  readonly results?: ResultsLedgerOptions;
}

interface ModuleSlot {
  readonly loaded: LoadedModule;
  served: ServedModule | undefined;
  revision: number;
  /** Re-serves of one module run one at a time, in order. */
  queue: Promise<void>;
  /** Its calls in flight across placements, aborted on close. */
  readonly running: Map<string, AbortController>;
  /** What its finished and disowned calls were, across placements (ADR 0208). */
  readonly ledger: CallLedger;
  /** Its results by idempotency key, across its nodes (ADR 0210). */
  readonly results: ResultsLedger;
  /** Why it is not served (not issued to this node, or refused); undefined while it serves. */
  notServed?: string | undefined;
}

export async function startNodeRuntime(options: StartNodeRuntimeOptions): Promise<NodeRuntime> {
  const { config } = options;
  const logger = options.logger ?? silentLogger;
  const connection =
    options.connection ??
    (await connectMesh({
      ...(config.brokerUrl === undefined ? {} : { servers: config.brokerUrl }),
      ...(config.brokerFile === undefined ? {} : { credsFile: config.brokerFile }),
      name: `tackle-mesh ${config.node}`,
    }));
  const ownsConnection = options.connection === undefined;
  void watchStatus(connection, logger);
  const slots = new Map<string, ModuleSlot>();
  /** This runtime's id in its answers to callers asking which calls it holds. */
  const instance = randomUUID();
  const closing = new AbortController();
  let gated = false;
  let buckets: MeshBuckets | undefined;
  try {
    buckets = await openMeshBuckets(connection);
    // Open mode: a node that holds no membership serves every configured module on its default
    // prefix (a single node without membership). Its first membership ends it for good: from then on
    // it serves exactly what it is issued.
    let invalidRecords = 0;
    const held = await listMemberships(
      connection,
      { node: config.node },
      { onInvalid: () => (invalidRecords += 1) },
    );
    gated = held.length > 0 || invalidRecords > 0;
    if (!gated) {
      logger.warn(
        "open mode: this node holds no membership, so it serves every configured module on its default prefix; issue a membership (tackle mesh issue) to serve only what is issued",
        { node: config.node },
      );
    }
    const loaded = await loadModules(config.modules, {
      logger,
      env: childEnvironment(config),
      node: config.node,
      ...options.load,
    });
    for (const module of loaded) {
      const entry = await buckets.membership.get(membershipKey(config.node, module.module));
      const slot: ModuleSlot = {
        loaded: module,
        served: undefined,
        revision: 0,
        queue: Promise.resolve(),
        running: new Map(),
        ledger: createCallLedger(),
        results: createResultsLedger(connection, module.module, config.node, logger, options.results),
      };
      slots.set(module.module, slot);
      await place(slot, entry?.operation === "PUT" ? entry : null, entry?.revision ?? 0);
    }
    const watchKey = `${config.node}.*`;
    let watcher = await buckets.membership.watch({ key: watchKey });
    // The watch is the runtime's only view of its membership: if it ever ends, it is started again.
    const following = (async () => {
      while (!closing.signal.aborted) {
        try {
          for await (const entry of watcher) {
            const module = entry.key.slice(config.node.length + 1);
            const slot = slots.get(module);
            if (slot === undefined || entry.revision <= slot.revision) continue;
            slot.revision = entry.revision;
            slot.queue = slot.queue.then(() =>
              place(slot, entry.operation === "PUT" ? entry : null, entry.revision),
            );
            await slot.queue;
          }
          if (closing.signal.aborted) return;
          logger.warn("membership watch ended; watching again", { key: watchKey });
        } catch (error) {
          if (closing.signal.aborted) return;
          logger.error("membership watch failed; watching again", {
            key: watchKey,
            error: (error as Error)?.message,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
        if (closing.signal.aborted) return;
        try {
          watcher = await buckets.membership.watch({ key: watchKey });
        } catch (error) {
          logger.error("could not watch the membership", { key: watchKey, error: (error as Error)?.message });
        }
      }
    })();

    return {
      node: config.node,
      modules: () =>
        [...slots.values()].map(
          (slot) =>
            slot.served?.info ??
            describeModule(slot.loaded, {
              node: config.node,
              ...(slot.notServed === undefined ? {} : { notServed: slot.notServed }),
            }),
        ),
      async close() {
        closing.abort(new Error("the node runtime is closing"));
        for (const slot of slots.values()) {
          for (const call of slot.running.values()) call.abort(new Error("the node runtime is closing"));
        }
        watcher.stop();
        await following.catch(() => undefined);
        await Promise.allSettled([...slots.values()].map((slot) => slot.queue));
        await Promise.allSettled([...slots.values()].map((slot) => slot.served?.stop()));
        await Promise.allSettled([...slots.values()].map((slot) => slot.loaded.close()));
        if (ownsConnection) await connection.drain().catch(() => connection.close());
      },
    };
  } catch (error) {
    await Promise.allSettled([...slots.values()].map((slot) => slot.served?.stop()));
    await Promise.allSettled([...slots.values()].map((slot) => slot.loaded.close()));
    if (ownsConnection) await connection.close();
    throw error;
  }

  /**
   * Serves a module where its record puts it: the new placement answers before the old one stops.
   * Without a record it serves on its default prefix in open mode, and not at all otherwise.
   */
  async function place(
    slot: ModuleSlot,
    entry: KvWatchEntry | { json<T>(): T; key: string } | null,
    revision: number,
  ) {
    const module = slot.loaded.module;
    let placement: Placement = { prefix: defaultModulePrefix(module), seats: {} };
    if (entry !== null) {
      try {
        const record = checkMembership(entry.json(), `${MEMBERSHIP_BUCKET}/${entry.key}`);
        placement = { prefix: record.prefix, seats: record.seats };
      } catch (error) {
        logger.error("membership record refused; the module keeps its current placement", {
          module,
          error: (error as Error).message,
        });
        return;
      }
      if (!gated) {
        gated = true;
        logger.info("membership issued to this node: open mode ends; serving only issued modules", {
          node: config.node,
        });
        for (const other of slots.values()) {
          if (other === slot) continue;
          other.queue = other.queue.then(async () => {
            const held = await buckets?.membership.get(membershipKey(config.node, other.loaded.module));
            if (held === undefined || held === null || held.operation !== "PUT") {
              await place(other, null, other.revision);
            }
          });
        }
      }
    } else if (gated) {
      await stopServing(
        slot,
        `not issued to node ${config.node}: not served (tackle mesh issue ${config.node} ${module})`,
      );
      return;
    }
    const previous = slot.served;
    if (previous !== undefined && samePlacement(previous.placement, placement)) return;
    const refused = await refusal(slot, placement.prefix, entry !== null);
    if (refused !== undefined) {
      logger.error("module refused: another bundle serves it on the mesh", { module, reason: refused });
      await noteBundle(connection, module, {
        refusedNode: config.node,
        refusedDigest: slot.loaded.digest,
      }).catch(() => undefined);
      await stopServing(slot, refused);
      return;
    }
    try {
      slot.served = await serveModule(
        connection,
        slot.loaded,
        placement,
        config.node,
        logger,
        slot.running,
        instance,
        slot.ledger,
        slot.results,
      );
      slot.notServed = undefined;
      slot.revision = Math.max(slot.revision, revision);
      logger.info(previous === undefined ? "serving module" : "re-serving module on its new membership", {
        module,
        prefix: placement.prefix,
        seats: placement.seats,
        digest: slot.loaded.digest,
      });
    } catch (error) {
      logger.error("could not serve module", { module, error: (error as Error).message });
      return;
    }
    await previous?.stop();
    if (entry !== null) {
      await noteBundle(connection, module, { digest: slot.loaded.digest }).catch(() => undefined);
    }
  }

  async function stopServing(slot: ModuleSlot, reason: string): Promise<void> {
    const served = slot.served;
    slot.served = undefined;
    slot.notServed = reason;
    if (served !== undefined) {
      await served.stop();
      logger.info("stopped serving module", { module: slot.loaded.module, reason });
    }
  }

  /**
   * Why this node must not serve the module: the catalogue (for an issued module) or the node
   * answering for it now (open mode) has another bundle under the same name. Never merged.
   */
  async function refusal(slot: ModuleSlot, prefix: string, issued: boolean): Promise<string | undefined> {
    const { module, digest } = slot.loaded;
    let theirs: string | undefined;
    let holder = "";
    if (issued) {
      const record = (await readCatalogue(connection, { onInvalid: () => {} }).catch(() => [])).find(
        (entry) => entry.module === module,
      );
      theirs = record?.digest;
      holder = "the mesh's catalogue";
    }
    if (theirs === undefined) {
      try {
        const reply = await connection.request(`${prefix}.tools`, undefined, { timeout: 300 });
        const info = decodeJson(reply.data) as ModuleInfo | undefined;
        if (info?.node !== config.node && typeof info?.digest === "string") {
          theirs = info.digest;
          holder = `node ${info.node}`;
        }
      } catch {
        // Nobody answers for it: nothing to compare with.
      }
    }
    if (theirs === undefined || theirs === digest) return undefined;
    return `refused: ${holder} has module ${module} as bundle ${theirs}, but this node's bundle is ${digest}; serve the same bundle, or revoke the module on every node to change it`;
  }
}

function samePlacement(left: Placement, right: Placement): boolean {
  return (
    left.prefix === right.prefix && JSON.stringify(sorted(left.seats)) === JSON.stringify(sorted(right.seats))
  );
}

function sorted(record: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(record).sort(([left], [right]) => left.localeCompare(right));
}

async function watchStatus(connection: NatsConnection, logger: Logger): Promise<void> {
  for await (const status of connection.status()) {
    if (status.type === "disconnect")
      logger.warn("lost the NATS connection; reconnecting", { server: status.server });
    else if (status.type === "reconnect") logger.info("reconnected to NATS", { server: status.server });
    else if (status.type === "error") logger.error("NATS error", { error: status.error?.message });
  }
}
