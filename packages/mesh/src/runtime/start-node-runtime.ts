/**
 * `startNodeRuntime`: the node's one process. It connects the bus, loads every configured bundle,
 * serves each module where its membership puts it, and re-serves when the membership changes.
 */
import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { type Logger, silentLogger } from "@tackle/core";
import { type LoadModulesOptions, loadModules } from "../bundles/load-modules.ts";
import type { MeshConfig } from "../config/load-mesh-config.ts";
import { listMemberships, openMeshBuckets } from "../membership/membership-store.ts";
import { membershipKey } from "../membership/records.ts";
import { connectMesh } from "../nats/connect-mesh.ts";
import { type CallLimits, createAdmission } from "./admission.ts";
import { createCallLedger } from "./call-ledger.ts";
import { childEnvironment } from "./child-environment.ts";
import { describeModule, type ModuleInfo } from "./module-info.ts";
import { type ModuleSlot, type PlacementSite, placeModule } from "./place-module.ts";
import { createResultsLedger, type ResultsLedgerOptions } from "./results-ledger.ts";

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
  /**
   * How many of one module's calls run at once on this node (default 256) and wait their turn (default
   * 1,024); past both a call is refused `overloaded`, retryable (ADR 0214). Default: the config's
   * (`MESH_CALLS_CONCURRENT`, `MESH_CALLS_WAITING`).
   */
  readonly calls?: CallLimits;
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
  const closing = new AbortController();
  try {
    const site: PlacementSite = {
      connection,
      node: config.node,
      logger,
      instance: randomUUID(),
      slots,
      buckets: await openMeshBuckets(connection),
      gated: await holdsMembership(connection, config.node, logger),
    };
    const loaded = await loadModules(config.modules, {
      logger,
      env: childEnvironment(config),
      node: config.node,
      ...options.load,
    });
    for (const module of loaded) {
      const entry = await site.buckets.membership.get(membershipKey(config.node, module.module));
      const slot: ModuleSlot = {
        loaded: module,
        served: undefined,
        revision: 0,
        queue: Promise.resolve(),
        running: new Map(),
        ledger: createCallLedger(),
        admission: createAdmission(options.calls ?? config.calls),
        results: createResultsLedger(connection, module.module, config.node, logger, options.results),
      };
      slots.set(module.module, slot);
      await placeModule(site, slot, entry?.operation === "PUT" ? entry : null, entry?.revision ?? 0);
    }
    const following = await followMembership(site, closing.signal);

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
        following.stop();
        await following.ended.catch(() => undefined);
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
}

/**
 * Whether the node is gated (serves only what it is issued). Open mode: a node that holds no
 * membership serves every configured module on its default prefix (a single node without membership).
 * Its first membership ends it for good: from then on it serves exactly what it is issued.
 */
async function holdsMembership(connection: NatsConnection, node: string, logger: Logger): Promise<boolean> {
  let invalidRecords = 0;
  const held = await listMemberships(connection, { node }, { onInvalid: () => (invalidRecords += 1) });
  const gated = held.length > 0 || invalidRecords > 0;
  if (!gated) {
    logger.warn(
      "open mode: this node holds no membership, so it serves every configured module on its default prefix; issue a membership (tackle mesh issue) to serve only what is issued",
      { node },
    );
  }
  return gated;
}

/**
 * Follows the membership records, placing each of the node's modules again as its record changes,
 * and a module refused for a prefix that nests with another party's (ADRs 0219, 0220) again as any
 * record changes: a revoke or a move elsewhere may have freed its prefix. The watch is the runtime's
 * only view of its membership: if it ever ends, it is started again until `closing`.
 */
async function followMembership(
  site: PlacementSite,
  closing: AbortSignal,
): Promise<{ readonly ended: Promise<void>; stop(): void }> {
  const { node, logger, slots } = site;
  const watchKey = "*.*";
  let watcher = await site.buckets.membership.watch({ key: watchKey });
  const ended = (async () => {
    while (!closing.aborted) {
      try {
        for await (const entry of watcher) {
          const own = entry.key.startsWith(`${node}.`)
            ? slots.get(entry.key.slice(node.length + 1))
            : undefined;
          if (own !== undefined && entry.revision > own.revision) {
            own.revision = entry.revision;
            own.queue = own.queue.then(() =>
              placeModule(site, own, entry.operation === "PUT" ? entry : null, entry.revision),
            );
          }
          // Once caught up (the first records replay together), not for each record replayed.
          if (entry.delta === 0) placeRefusedAgain(site, own);
          await Promise.allSettled([...slots.values()].map((slot) => slot.queue));
        }
        if (closing.aborted) return;
        logger.warn("membership watch ended; watching again", { key: watchKey });
      } catch (error) {
        if (closing.aborted) return;
        logger.error("membership watch failed; watching again", {
          key: watchKey,
          error: (error as Error)?.message,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
      if (closing.aborted) return;
      try {
        watcher = await site.buckets.membership.watch({ key: watchKey });
      } catch (error) {
        logger.error("could not watch the membership", { key: watchKey, error: (error as Error)?.message });
      }
    }
  })();
  return { ended, stop: () => watcher.stop() };
}

/** Places each module refused for a nesting prefix again, with its record as the bucket holds it now. */
function placeRefusedAgain(site: PlacementSite, placing: ModuleSlot | undefined): void {
  for (const slot of site.slots.values()) {
    if (slot === placing || slot.overlapRefused !== true) continue;
    slot.queue = slot.queue.then(async () => {
      if (slot.overlapRefused !== true) return;
      try {
        const entry = await site.buckets.membership.get(membershipKey(site.node, slot.loaded.module));
        await placeModule(site, slot, entry?.operation === "PUT" ? entry : null, slot.revision);
      } catch (error) {
        // Still refused; the next change of any record tries again.
        site.logger.warn("could not place a refused module again", {
          module: slot.loaded.module,
          error: (error as Error)?.message,
        });
      }
    });
  }
}

async function watchStatus(connection: NatsConnection, logger: Logger): Promise<void> {
  for await (const status of connection.status()) {
    if (status.type === "disconnect")
      logger.warn("lost the NATS connection; reconnecting", { server: status.server });
    else if (status.type === "reconnect") logger.info("reconnected to NATS", { server: status.server });
    else if (status.type === "error") logger.error("NATS error", { error: status.error?.message });
  }
}
