/**
 * A module's results ledger (ADR 0210): one JetStream KV bucket per module, keyed by (tool,
 * idempotency key), so a call repeated under its key — a durable step re-run after its driver died —
 * is answered with the first call's recorded result by whichever node of the module receives it, or
 * waits for the first call while it still runs, instead of running the tool again.
 */
import { createHash } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, type KvEntry, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type Logger, ToolError, type ToolErrorPayload } from "@tackle/core";
import { resultsBucket } from "../credentials/permissions.ts";
import { MEMBERSHIP_BUCKET } from "../membership/records.ts";
import { maxPayloadOf } from "../nats/wire.ts";

/** What a call under a key ended with: its output as JSON, or its error. */
export type KeyedOutcome =
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly error: ToolError };

export interface ResultsLedgerOptions {
  /** How long a key's result is kept. Default 24 h. */
  readonly ttlMs?: number;
  /** The bucket's bound; past it the oldest results go first. Default 256 MiB. */
  readonly maxBytes?: number;
  /** How often a repeat checks a first call still running. Default 100 ms. */
  readonly pollMs?: number;
}

export interface KeyedCall {
  readonly tool: string;
  readonly key: string;
  readonly args: unknown;
  /** This node process's alive subject: a repeat asks it whether the first call's node still lives. */
  readonly alive: string;
  readonly signal: AbortSignal;
  /** When a repeat stops waiting for a first call still running. */
  readonly deadline: number;
}

export interface ResultsLedger {
  /** Runs `execute` unless the key already ran (or runs) on any node of the module. */
  once(call: KeyedCall, execute: () => Promise<KeyedOutcome>): Promise<KeyedOutcome>;
}

interface RunningRecord {
  readonly state: "running";
  readonly tool: string;
  readonly args: string;
  readonly node: string;
  readonly alive: string;
  readonly at: string;
}

interface DoneRecord {
  readonly state: "done";
  readonly tool: string;
  readonly args: string;
  readonly node: string;
  readonly at: string;
  readonly output?: unknown;
  readonly error?: ToolErrorPayload;
  /** The output was over the bucket's value limit: the call ran, its result is not kept. */
  readonly notKept?: true;
}

type LedgerRecord = RunningRecord | DoneRecord;

/** How long a node keeps trying to write a key's end through a broker outage. */
const persistForMs = 10 * 60_000;

export function createResultsLedger(
  connection: NatsConnection,
  module: string,
  node: string,
  logger: Logger,
  options: ResultsLedgerOptions = {},
): ResultsLedger {
  const pollMs = options.pollMs ?? 100;
  /** Keys this process runs now: a repeat here waits in memory. */
  const local = new Map<string, { readonly args: string; readonly settling: Promise<KeyedOutcome> }>();
  /** Keys this process ran whose end the broker has not taken yet: a repeat here is answered from memory. */
  const unrecorded = new Map<string, { readonly args: string; readonly settling: Promise<KeyedOutcome> }>();
  let bucket: Promise<KV> | undefined;
  const open = () => {
    bucket ??= openResultsBucket(connection, module, options).catch((error: unknown) => {
      bucket = undefined;
      throw error;
    });
    return bucket;
  };

  async function claim(
    kv: KV,
    call: KeyedCall,
    id: string,
    args: string,
    revision?: number,
  ): Promise<number | undefined> {
    const record: RunningRecord = {
      state: "running",
      tool: call.tool,
      args,
      node,
      alive: call.alive,
      at: new Date().toISOString(),
    };
    try {
      return revision === undefined
        ? await kv.create(id, JSON.stringify(record))
        : await kv.update(id, JSON.stringify(record), revision);
    } catch (error) {
      if (isWrongSequence(error)) return undefined;
      throw error;
    }
  }

  async function run(
    kv: KV,
    call: KeyedCall,
    id: string,
    args: string,
    revision: number,
    execute: () => Promise<KeyedOutcome>,
  ) {
    const outcome = await execute();
    // A failure worth retrying frees the key, so the retry runs; any other outcome is the key's for good.
    if (!outcome.ok && outcome.error.retryable) {
      await persist(call, id, args, outcome, "could not free a key", () =>
        kv.delete(id, { previousSeq: revision }),
      );
      return outcome;
    }
    const done: DoneRecord = {
      state: "done",
      tool: call.tool,
      args,
      node,
      at: new Date().toISOString(),
      ...(outcome.ok ? { output: outcome.output } : { error: outcome.error.toJSON() }),
    };
    let text = JSON.stringify(done);
    if (Buffer.byteLength(text) > maxPayloadOf(connection) - 4096)
      text = JSON.stringify({ ...done, output: undefined, notKept: true } satisfies DoneRecord);
    await persist(call, id, args, outcome, "could not record a result", () => kv.update(id, text, revision));
    return outcome;
  }

  /**
   * Writes the key's end (its result, or its release). A write the broker does not take (an outage)
   * is tried again in the background until it lands, for up to `persistForMs`: left undone, the record
   * would say `running` under a node that lives, and every repeat would wait on it until the TTL.
   * Meanwhile a repeat in this process is answered from memory. A write refused because the key moved
   * on (another node took it over) is not tried again.
   */
  async function persist(
    call: KeyedCall,
    id: string,
    args: string,
    outcome: KeyedOutcome,
    what: string,
    write: () => Promise<unknown>,
  ): Promise<void> {
    const attempt = () =>
      write().then(
        () => true,
        (error: unknown) => {
          if (isWrongSequence(error)) {
            report(what, call, error);
            return true;
          }
          return error;
        },
      );
    const first = await attempt();
    if (first === true) return;
    report(`${what} (trying again until the broker takes it)`, call, first);
    const until = Date.now() + persistForMs;
    const retried = (async () => {
      let delay = 250;
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 2000);
        const result = await attempt();
        if (result === true) return;
        if (Date.now() > until || connection.isClosed()) return report(what, call, result);
      }
    })();
    unrecorded.set(id, { args, settling: Promise.resolve(outcome) });
    void retried.finally(() => unrecorded.delete(id));
  }

  function report(what: string, call: KeyedCall, error: unknown): void {
    logger.error(`results ledger: ${what}`, {
      module,
      tool: call.tool,
      error: (error as Error)?.message ?? String(error),
    });
  }

  async function settle(
    call: KeyedCall,
    id: string,
    args: string,
    execute: () => Promise<KeyedOutcome>,
  ): Promise<KeyedOutcome> {
    const kv = await open();
    let delay = pollMs;
    for (;;) {
      const claimed = await claim(kv, call, id, args);
      if (claimed !== undefined) return run(kv, call, id, args, claimed, execute);
      const entry = await kv.get(id);
      if (entry === null || entry.operation !== "PUT") continue;
      const record = parse(entry);
      if (record === undefined)
        throw new Error(`results ledger: the record of ${module}.${call.tool} under its key does not parse`);
      if (record.args !== args) return { ok: false, error: reused(module, call.tool) };
      if (record.state === "done") return recorded(module, call.tool, record);
      if (call.signal.aborted)
        return {
          ok: false,
          error: new ToolError(
            "aborted",
            `"${module}.${call.tool}" was cancelled while it waited for the first call under its key`,
            { retryable: true },
          ),
        };
      if (Date.now() >= call.deadline) return { ok: false, error: stillRunning(module, call.tool, record) };
      // The first call's node is gone (its connection holds no alive subscription): this node runs it.
      if (record.alive !== call.alive && (await isGone(connection, record.alive))) {
        const taken = await claim(kv, call, id, args, entry.revision);
        if (taken === undefined) continue;
        logger.warn("results ledger: the node running this key is gone; running it here", {
          module,
          tool: call.tool,
          node: record.node,
        });
        return run(kv, call, id, args, taken, execute);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }

  return {
    async once(call, execute) {
      const id = keyId(call.tool, call.key);
      const args = fingerprint(call.args);
      // A repeat of a call settling here waits for it; anything else goes by the bucket.
      const first = local.get(id) ?? unrecorded.get(id);
      if (first?.args === args) return first.settling;
      const settling = settle(call, id, args, execute);
      if (first === undefined) {
        local.set(id, { args, settling });
        void settling.finally(() => local.delete(id)).catch(() => undefined);
      }
      return settling;
    },
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
  const kv = await new Kvm(connection).create(name, {
    history: 1,
    replicas,
    ttl: options.ttlMs ?? 24 * 60 * 60 * 1000,
    max_bytes: options.maxBytes ?? 256 * 1024 * 1024,
    maxValueSize: maxPayloadOf(connection),
    description: `tackle mesh: results of ${module}'s calls by idempotency key`,
  });
  // Full, the oldest results go (a repeat that old runs again) rather than refusing new calls.
  const info = await manager.streams.info(`KV_${name}`);
  if (info.config.discard !== "old")
    await manager.streams.update(`KV_${name}`, { ...info.config, discard: "old" as never });
  return kv;
}

function keyId(tool: string, key: string): string {
  return createHash("sha256").update(tool).update("\n").update(key).digest("hex");
}

/** The arguments' JSON with keys sorted, hashed: a repeat must carry the same arguments. */
function fingerprint(args: unknown): string {
  const canonical = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(canonical);
    if (typeof value !== "object" || value === null) return value;
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((name) => [name, canonical((value as Record<string, unknown>)[name])]),
    );
  };
  return createHash("sha256")
    .update(JSON.stringify(canonical(args ?? {})))
    .digest("base64url");
}

function parse(entry: KvEntry): LedgerRecord | undefined {
  try {
    const record = entry.json<LedgerRecord>();
    return record?.state === "running" || record?.state === "done" ? record : undefined;
  } catch {
    return undefined;
  }
}

function recorded(module: string, tool: string, record: DoneRecord): KeyedOutcome {
  if (record.error !== undefined) return { ok: false, error: ToolError.fromPayload(record.error) };
  if (record.notKept === true) {
    return {
      ok: false,
      error: new ToolError(
        "result_not_kept",
        `"${module}.${tool}" already ran under this idempotency key (on ${record.node}); its result was too large to keep, so it cannot be answered again`,
        { retryable: false, data: { tool: `${module}.${tool}`, node: record.node } },
      ),
    };
  }
  return { ok: true, output: record.output };
}

function reused(module: string, tool: string): ToolError {
  return new ToolError(
    "idempotency_key_reused",
    `"${module}.${tool}" already ran under this idempotency key with other arguments; use a new key for a new call`,
    { retryable: false, data: { tool: `${module}.${tool}` } },
  );
}

function stillRunning(module: string, tool: string, record: RunningRecord): ToolError {
  return new ToolError(
    "timeout",
    `"${module}.${tool}" under this idempotency key is still running on ${record.node}; ask again with the same key for its result`,
    { retryable: true, data: { tool: `${module}.${tool}`, node: record.node, running: true } },
  );
}

function isWrongSequence(error: unknown): boolean {
  return /wrong last sequence|key exists/i.test((error as Error)?.message ?? "");
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
