/**
 * How a call under an idempotency key runs once across a module's nodes (ADR 0210, 0213), over any
 * store with compare-and-set writes: the results ledger gives it a JetStream KV bucket; the ledger's
 * property test gives it one in memory, with nodes killed at random points.
 */
import { createHash, randomUUID } from "node:crypto";
import { type Logger, ToolError, type ToolErrorPayload, type ToolTakeover } from "@tackle/core";
import { canonicalJson } from "./canonical-json.ts";

/** What a call under a key ended with: its output as JSON, or its error. */
export type KeyedOutcome =
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly error: ToolError };

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

/**
 * Runs the tool for a key this node holds. `takeover` is set when the key's earlier run was on a node
 * that died mid-call (its effect may have landed): the tool is asked for that run's outcome (ADR 0213).
 */
export type KeyedExecute = (takeover?: ToolTakeover) => Promise<KeyedOutcome>;

export interface ResultsLedger {
  /** Runs `execute` unless the key already ran (or runs) on any node of the module. */
  once(call: KeyedCall, execute: KeyedExecute): Promise<KeyedOutcome>;
}

/** One record of the store, as the ledger reads it. */
export interface LedgerEntry {
  readonly revision: number;
  /** "PUT" for a record; a deleted key reads as another operation (or null). */
  readonly operation: string;
  readonly value: string;
}

/**
 * What the ledger needs of its store. A compare-and-set that loses (the key exists, or moved past
 * `revision`) throws an error whose message says "wrong last sequence" or "key exists", as NATS KV's do.
 */
export interface LedgerStore {
  create(id: string, value: string): Promise<number>;
  update(id: string, value: string, revision: number): Promise<number>;
  get(id: string): Promise<LedgerEntry | null>;
  delete(id: string, revision: number): Promise<void>;
  /** Whether the node process holding `alive` is gone (no connection holds its alive subject). */
  isGone(alive: string): Promise<boolean>;
}

export interface LedgerHost {
  readonly module: string;
  readonly node: string;
  readonly logger: Logger;
  /** The store, opened on first use; a failure refuses the call (the caller retries). */
  open(): Promise<LedgerStore>;
  /** The largest record the store keeps; past it a result is recorded as run but not kept. */
  maxRecordBytes(): number;
  /** Whether this node's connection is closed for good (writes are not tried again). */
  isClosed(): boolean;
  /** How often a repeat checks a first call still running. Default 100 ms. */
  readonly pollMs?: number;
  /** How long a node keeps trying to write a key's end through a broker outage. Default 10 min. */
  readonly persistForMs?: number;
  /** The first and the longest wait between those tries. Default 250 ms and 2 s. */
  readonly persistDelayMs?: readonly [number, number];
  /**
   * How long a key's node must stay unheard (no connection holds its alive subject) before another
   * node takes the key over (ADR 0228): a node reconnecting after a blip is not dead. Default 2 s.
   */
  readonly goneAfterMs?: number;
}

interface RunningRecord {
  readonly state: "running";
  readonly tool: string;
  readonly args: string;
  readonly node: string;
  readonly alive: string;
  readonly at: string;
  /** This claim's own id: a claim whose write answered nothing is found by it (ADR 0228). */
  readonly claim?: string;
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

interface Settling {
  readonly args: string;
  readonly settling: Promise<KeyedOutcome>;
  /** The first call's signal: its caller's cancel frees the key. */
  readonly signal: AbortSignal;
}

/** One ledger's settings and what it holds in memory, shared by the functions below. */
interface Ledger {
  readonly host: LedgerHost;
  readonly pollMs: number;
  readonly persistForMs: number;
  readonly goneAfterMs: number;
  readonly firstDelay: number;
  readonly longestDelay: number;
  /** Keys this process runs now: a repeat here waits in memory. */
  readonly local: Map<string, Settling>;
  /** Keys this process ran whose end the broker has not taken yet: a repeat here is answered from memory. */
  readonly unrecorded: Map<string, Settling>;
}

export function createKeyedOnce(host: LedgerHost): ResultsLedger {
  const [firstDelay, longestDelay] = host.persistDelayMs ?? [250, 2000];
  const ledger: Ledger = {
    host,
    pollMs: host.pollMs ?? 100,
    persistForMs: host.persistForMs ?? 10 * 60_000,
    goneAfterMs: host.goneAfterMs ?? 2000,
    firstDelay,
    longestDelay,
    local: new Map(),
    unrecorded: new Map(),
  };
  const { local, unrecorded } = ledger;
  return {
    async once(call, execute) {
      const id = keyId(call.tool, call.key);
      const args = fingerprint(call.args);
      // A repeat of a call settling here waits for it; anything else goes by the bucket. A first call
      // that ended freeing the key (its caller cancelled it, or it failed retryably) did not end the
      // key: the repeat goes on as if it came now, as one on another node does — by the bucket when
      // that release is not recorded yet (the broker has not taken it), which waits for it to land.
      let first = local.get(id) ?? unrecorded.get(id);
      while (first?.args === args) {
        const outcome = await first.settling;
        if (!freesKey(outcome, first.signal) || call.signal.aborted) return outcome;
        const next = local.get(id) ?? unrecorded.get(id);
        if (next === first) break;
        first = next;
      }
      const settling = settle(ledger, call, id, args, execute);
      if (first === undefined) {
        local.set(id, { args, settling, signal: call.signal });
        void settling.finally(() => local.delete(id)).catch(() => undefined);
      }
      return settling;
    },
  };
}

/**
 * Claims the key (a create, or a takeover's update of the dead node's `previous` record). A claim
 * whose write answered nothing (the connection dropped under it, the request timed out) may have
 * landed all the same: the call is refused unrun, and the claim is undone once the broker answers.
 */
async function claim(
  ledger: Ledger,
  store: LedgerStore,
  call: KeyedCall,
  id: string,
  args: string,
  previous?: LedgerEntry,
): Promise<number | undefined> {
  const { node } = ledger.host;
  const token = randomUUID();
  const record: RunningRecord = {
    state: "running",
    tool: call.tool,
    args,
    node,
    alive: call.alive,
    at: new Date().toISOString(),
    claim: token,
  };
  try {
    return previous === undefined
      ? await store.create(id, JSON.stringify(record))
      : await store.update(id, JSON.stringify(record), previous.revision);
  } catch (error) {
    if (isWrongSequence(error)) return undefined;
    void undoClaim(ledger, store, call, id, token, previous);
    throw error;
  }
}

/**
 * Undoes a claim whose write answered nothing, if it landed (ADR 0228): left, it would say `running`
 * under a node that lives, and every call under the key would wait on it until the TTL. Reads the key
 * until the broker answers: the claim found is deleted (a takeover's is replaced by the dead node's
 * record again, so the next call takes over, told so); a key that moved on cannot take it any more;
 * one not changed yet is watched a few seconds more, for a write the broker was slow to take.
 */
async function undoClaim(
  ledger: Ledger,
  store: LedgerStore,
  call: KeyedCall,
  id: string,
  token: string,
  previous: LedgerEntry | undefined,
): Promise<void> {
  const { host, persistForMs, firstDelay, longestDelay } = ledger;
  const until = Date.now() + persistForMs;
  let watchUntil: number | undefined;
  let delay = firstDelay;
  let last: unknown;
  while (Date.now() < until && !host.isClosed() && (watchUntil === undefined || Date.now() < watchUntil)) {
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, longestDelay);
    try {
      const entry = await store.get(id);
      const record = entry?.operation === "PUT" ? parse(entry.value) : undefined;
      if (entry !== null && record?.state === "running" && record.claim === token) {
        if (previous === undefined) await store.delete(id, entry.revision);
        else await store.update(id, previous.value, entry.revision);
        return;
      }
      const unchanged = previous === undefined ? record === undefined : entry?.revision === previous.revision;
      if (!unchanged) return;
      watchUntil ??= Date.now() + 2 * longestDelay;
    } catch (error) {
      if (isWrongSequence(error)) return;
      last = error;
    }
  }
  if (last !== undefined) report(ledger, "could not undo a claim whose answer was lost", call, last);
}

async function run(
  ledger: Ledger,
  store: LedgerStore,
  call: KeyedCall,
  id: string,
  args: string,
  revision: number,
  execute: () => Promise<KeyedOutcome>,
) {
  const { host } = ledger;
  const { node } = host;
  const outcome = await execute();
  // A failure worth retrying, or a run its caller cancelled, frees the key, so the retry runs; any
  // other outcome is the key's for good.
  if (freesKey(outcome, call.signal)) {
    await persist(ledger, call, id, args, outcome, "could not free a key", () => store.delete(id, revision));
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
  if (Buffer.byteLength(text) > host.maxRecordBytes())
    text = JSON.stringify({ ...done, output: undefined, notKept: true } satisfies DoneRecord);
  await persist(ledger, call, id, args, outcome, "could not record a result", () =>
    store.update(id, text, revision),
  );
  return outcome;
}

/**
 * Writes the key's end (its result, or its release). A write the broker does not take (an outage)
 * is tried again in the background until it lands, for up to `persistForMs`: left undone, the record
 * would say `running` under a node that lives, and every repeat would wait on it until the TTL.
 * Meanwhile a repeat in this process is answered from memory. A write refused because the key moved
 * on (another node took it over while this one ran: it was cut off from the broker) is not tried
 * again, and is reported as the takeover it is (ADR 0213).
 */
async function persist(
  ledger: Ledger,
  call: KeyedCall,
  id: string,
  args: string,
  outcome: KeyedOutcome,
  what: string,
  write: () => Promise<unknown>,
): Promise<void> {
  const { host, persistForMs, firstDelay, longestDelay, unrecorded } = ledger;
  const attempt = () =>
    write().then(
      () => true,
      (error: unknown) => {
        if (isWrongSequence(error)) {
          report(ledger, `${what}: ${takenOverWhileRunning}`, call, error);
          return true;
        }
        return error;
      },
    );
  const first = await attempt();
  if (first === true) return;
  report(ledger, `${what} (trying again until the broker takes it)`, call, first);
  const until = Date.now() + persistForMs;
  const retried = (async () => {
    let delay = firstDelay;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, longestDelay);
      const result = await attempt();
      if (result === true) return;
      if (Date.now() > until || host.isClosed()) return report(ledger, what, call, result);
    }
  })();
  unrecorded.set(id, { args, settling: Promise.resolve(outcome), signal: call.signal });
  void retried.finally(() => unrecorded.delete(id));
}

function report(ledger: Ledger, what: string, call: KeyedCall, error: unknown): void {
  const { module, logger } = ledger.host;
  logger.error(`results ledger: ${what}`, {
    module,
    tool: call.tool,
    error: (error as Error)?.message ?? String(error),
  });
}

async function settle(
  ledger: Ledger,
  call: KeyedCall,
  id: string,
  args: string,
  execute: KeyedExecute,
): Promise<KeyedOutcome> {
  const { host, pollMs } = ledger;
  const { module, logger } = host;
  const store = await host.open();
  let delay = pollMs;
  // Since when the key's node has been unheard, by its alive subject: a takeover waits `goneAfterMs`.
  let unheard: { readonly alive: string; readonly since: number } | undefined;
  for (;;) {
    const claimed = await claim(ledger, store, call, id, args);
    if (claimed !== undefined) return run(ledger, store, call, id, args, claimed, () => execute());
    const entry = await store.get(id);
    if (entry === null || entry.operation !== "PUT") continue;
    const record = parse(entry.value);
    if (record === undefined)
      throw new Error(`results ledger: the record of ${module}.${call.tool} under its key does not parse`);
    if (record.args !== args) return { ok: false, error: reused(module, call.tool) };
    if (record.state === "done") return recorded(module, call.tool, record);
    if (call.signal.aborted) return { ok: false, error: abortedWaiting(module, call.tool) };
    if (Date.now() >= call.deadline) return { ok: false, error: stillRunning(module, call.tool, record) };
    // The first call's node is gone (its connection has held no alive subscription for `goneAfterMs`):
    // this node takes the key over, and the tool is told so, to find out whether that run's effect
    // landed (ADR 0213). A node unheard for less may be reconnecting, its run going on (ADR 0228).
    const gone = record.alive !== call.alive && (await store.isGone(record.alive));
    if (!gone || unheard?.alive !== record.alive)
      unheard = gone ? { alive: record.alive, since: Date.now() } : undefined;
    if (gone && Date.now() - (unheard?.since ?? 0) >= ledger.goneAfterMs) {
      const taken = await claim(ledger, store, call, id, args, entry);
      if (taken === undefined) continue;
      logger.warn("results ledger: the node running this key is gone; taking it over here", {
        module,
        tool: call.tool,
        node: record.node,
      });
      return run(ledger, store, call, id, args, taken, () =>
        execute({ node: record.node, startedAt: record.at }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 1000);
  }
}

const takenOverWhileRunning =
  "another node took the key over while it ran here (this node was cut off from the broker long enough to seem gone); its effect may have been made twice unless the tool's recovery saw this run's";

/** The record's id in the bucket: the SHA-256 of tool and key. */
export function keyId(tool: string, key: string): string {
  return sha256(`${tool}\n${key}`, "hex");
}

/** The arguments' JSON with keys sorted, hashed: a repeat must carry the same arguments. */
function fingerprint(args: unknown): string {
  return sha256(canonicalJson(args ?? {}), "base64url");
}

function sha256(text: string, encoding: "hex" | "base64url"): string {
  return createHash("sha256").update(text).digest(encoding);
}

function parse(value: string): LedgerRecord | undefined {
  try {
    const record = JSON.parse(value) as LedgerRecord | null;
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

function abortedWaiting(module: string, tool: string): ToolError {
  return new ToolError(
    "aborted",
    `"${module}.${tool}" was cancelled while it waited for the first call under its key`,
    { retryable: true },
  );
}

function stillRunning(module: string, tool: string, record: RunningRecord): ToolError {
  return new ToolError(
    "timeout",
    `"${module}.${tool}" under this idempotency key is still running on ${record.node}; ask again with the same key for its result`,
    { retryable: true, data: { tool: `${module}.${tool}`, node: record.node, running: true } },
  );
}

/**
 * Whether a run's outcome leaves the key free: a retryable failure, or a failure of a call cancelled
 * by its caller (`aborted` is not retryable as an answer, but the call did not finish: a repeat runs it).
 */
function freesKey(outcome: KeyedOutcome, signal: AbortSignal): boolean {
  return !outcome.ok && (outcome.error.retryable || outcome.error.code === "aborted" || signal.aborted);
}

function isWrongSequence(error: unknown): boolean {
  return /wrong last sequence|key exists/i.test((error as Error)?.message ?? "");
}
