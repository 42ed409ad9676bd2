/**
 * A module's results ledger (ADR 0210): one JetStream KV bucket per module, keyed by (tool,
 * idempotency key), so a call repeated under its key — a durable step re-run after its driver died —
 * is answered with the first call's recorded result by whichever node of the module receives it, or
 * waits for the first call while it still runs, instead of running the tool again. The algorithm is
 * `keyed-once.ts`; this file gives it the bucket.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@tackle/core";
import { resultsBucket } from "../credentials/permissions.ts";
import { MEMBERSHIP_BUCKET } from "../membership/records.ts";
import { maxPayloadOf } from "../nats/wire.ts";
import { createKeyedOnce, type LedgerStore, type ResultsLedger } from "./keyed-once.ts";

export type { KeyedCall, KeyedExecute, KeyedOutcome, ResultsLedger } from "./keyed-once.ts";

export interface ResultsLedgerOptions {
  /** How long a key's result is kept. Default 24 h. */
  readonly ttlMs?: number;
  /** The bucket's bound; past it the oldest results go first. Default 256 MiB. */
  readonly maxBytes?: number;
  /** How often a repeat checks a first call still running. Default 100 ms. */
  readonly pollMs?: number;
  /** How long a key's node must stay unheard before another node takes the key over (ADR 0228). Default 2 s. */
  readonly goneAfterMs?: number;
}

export function createResultsLedger(
  connection: NatsConnection,
  module: string,
  node: string,
  logger: Logger,
  options: ResultsLedgerOptions = {},
): ResultsLedger {
  let store: Promise<LedgerStore> | undefined;
  return createKeyedOnce({
    module,
    node,
    logger,
    ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }),
    ...(options.goneAfterMs === undefined ? {} : { goneAfterMs: options.goneAfterMs }),
    open: () => {
      store ??= openResultsBucket(connection, module, options).then(
        (kv) => kvStore(connection, kv),
        (error: unknown) => {
          store = undefined;
          throw error;
        },
      );
      return store;
    },
    // Headers and the subject ride along with a record; keep a margin for them.
    maxRecordBytes: () => maxPayloadOf(connection) - 4096,
    isClosed: () => connection.isClosed(),
  });
}

function kvStore(connection: NatsConnection, kv: KV): LedgerStore {
  return {
    create: (id, value) => kv.create(id, value),
    update: (id, value, revision) => kv.update(id, value, revision),
    get: async (id) => {
      const entry = await kv.get(id);
      return entry === null
        ? null
        : { revision: entry.revision, operation: entry.operation, value: entry.string() };
    },
    delete: async (id, revision) => {
      await kv.delete(id, { previousSeq: revision });
    },
    isGone: (alive) => isGone(connection, alive),
  };
}

async function openResultsBucket(
  connection: NatsConnection,
  module: string,
  options: ResultsLedgerOptions,
): Promise<KV> {
  const name = resultsBucket(module);
  const manager = await jetstreamManager(connection);
  // As replicated as the mesh's memberships, so a cluster that keeps those keeps results too.
  const replicas = await manager.streams
    .info(`KV_${MEMBERSHIP_BUCKET}`)
    .then((info) => info.config.num_replicas)
    .catch(() => 1);
  const create = () =>
    new Kvm(connection).create(name, {
      history: 1,
      replicas,
      ttl: options.ttlMs ?? 24 * 60 * 60 * 1000,
      max_bytes: options.maxBytes ?? 256 * 1024 * 1024,
      maxValueSize: maxPayloadOf(connection),
      description: `tackle mesh: results of ${module}'s calls by idempotency key`,
    });
  // Two nodes of a module opening its bucket at once: both find no stream and add it; when the
  // first has already set discard "old" below, the second's add is refused as a different
  // configuration. The bucket exists by then, so a second create finds and opens it.
  const kv = await create().catch((error: unknown) => {
    if (!/already in use/i.test((error as Error)?.message ?? "")) throw error;
    return create();
  });
  // Full, the oldest results go (a repeat that old runs again) rather than refusing new calls.
  const info = await manager.streams.info(`KV_${name}`);
  if (info.config.discard !== "old")
    await manager.streams.update(`KV_${name}`, { ...info.config, discard: "old" as never });
  return kv;
}

/** "No responders" on the node process's alive subject: no connection holds it any more. */
async function isGone(connection: NatsConnection, alive: string): Promise<boolean> {
  try {
    await connection.request(alive, undefined, { timeout: 1000 });
    return false;
  } catch (error) {
    const cause = (error as { cause?: unknown })?.cause;
    return /no ?responders/i.test(
      `${(error as Error)?.name} ${(error as Error)?.message} ${(cause as Error)?.name}`,
    );
  }
}
