/**
 * The results ledger when the broker fails under a write (ADR 0228), in process: a release the broker
 * has not taken yet, and a claim whose answer is lost after the bucket took it. Found by
 * `test/broker-faults.property.test.ts`.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { silentLogger, ToolError } from "@tackle/core";
import { canonicalJson } from "./canonical-json.ts";
import { createKeyedOnce, type KeyedCall, keyId, type LedgerEntry, type LedgerStore } from "./keyed-once.ts";

/** A compare-and-set bucket in memory; `faults` makes its next writes of a kind fail, before or after they land. */
function memoryStore() {
  const entries = new Map<string, LedgerEntry>();
  let sequence = 0;
  const faults: { kind: "create" | "update" | "delete"; landed: boolean }[] = [];
  const put = (id: string, operation: string, value: string) => {
    sequence += 1;
    entries.set(id, { revision: sequence, operation, value });
    return sequence;
  };
  const write = async <T>(kind: "create" | "update" | "delete", land: () => T): Promise<T> => {
    const at = faults.findIndex((fault) => fault.kind === kind);
    const fault = at >= 0 ? faults.splice(at, 1)[0] : undefined;
    if (fault !== undefined && !fault.landed) throw new Error("disconnected: the broker did not take it");
    const result = land();
    if (fault !== undefined) throw new Error("disconnected: the answer was lost");
    return result;
  };
  const store: LedgerStore = {
    create: (id, value) =>
      write("create", () => {
        if (entries.get(id)?.operation === "PUT") throw new Error("wrong last sequence: key exists");
        return put(id, "PUT", value);
      }),
    update: (id, value, revision) =>
      write("update", () => {
        if (entries.get(id)?.revision !== revision) throw new Error("wrong last sequence");
        return put(id, "PUT", value);
      }),
    delete: (id, revision) =>
      write("delete", () => {
        if (entries.get(id)?.revision !== revision) throw new Error("wrong last sequence");
        put(id, "DEL", "");
      }),
    get: async (id) => entries.get(id) ?? null,
    isGone: async () => false,
  };
  return { store, entries, faults };
}

/** A ledger on `store`; `goneAfterMs` left out takes the default. */
function ledgerOn(store: LedgerStore, goneAfterMs?: number) {
  return createKeyedOnce({
    ...(goneAfterMs === undefined ? {} : { goneAfterMs }),
    module: "m",
    node: "node-a",
    logger: silentLogger,
    open: async () => store,
    maxRecordBytes: () => 1 << 20,
    isClosed: () => false,
    pollMs: 5,
    persistDelayMs: [20, 40],
  });
}

function keyed(signal: AbortSignal, deadlineMs = 2000): KeyedCall {
  return {
    tool: "apply",
    key: "k",
    args: { id: 1 },
    alive: "alive.a",
    signal,
    deadline: Date.now() + deadlineMs,
  };
}

test("a repeat after a cancelled first call whose release the broker has not taken runs once it lands, not answered `aborted`", async () => {
  const { store, faults } = memoryStore();
  const ledger = ledgerOn(store);
  let runs = 0;
  const cancel = new AbortController();
  // The first call is cancelled by its caller; freeing its key fails twice (the broker is away).
  faults.push({ kind: "delete", landed: false }, { kind: "delete", landed: false });
  const first = await ledger.once(keyed(cancel.signal), async () => {
    runs += 1;
    cancel.abort();
    return { ok: false, error: new ToolError("aborted", "cancelled by its caller") };
  });
  assert.equal(first.ok, false);
  // The repeat is not cancelled: it waits for the release, then runs.
  const repeat = await ledger.once(keyed(new AbortController().signal), async () => {
    runs += 1;
    return { ok: true, output: { ran: runs } };
  });
  assert.deepEqual(repeat, { ok: true, output: { ran: 2 } });
});

test("a claim the bucket took whose answer was lost does not hold the key: the call is refused unrun, a repeat runs", async () => {
  const { store, entries, faults } = memoryStore();
  const ledger = ledgerOn(store);
  let runs = 0;
  const execute = async () => {
    runs += 1;
    return { ok: true as const, output: { ran: runs } };
  };
  faults.push({ kind: "create", landed: true });
  await assert.rejects(ledger.once(keyed(new AbortController().signal), execute), /answer was lost/);
  assert.equal(runs, 0);
  assert.equal([...entries.values()][0]?.operation, "PUT", "the claim landed");
  // Asked again on the same node, the key is not held by a claim nobody runs.
  const repeat = await ledger.once(keyed(new AbortController().signal), execute);
  assert.deepEqual(repeat, { ok: true, output: { ran: 1 } });
});

test("a takeover claim whose answer was lost puts the dead node's record back: the next call takes over, told so", async () => {
  const { store, entries, faults } = memoryStore();
  const gone = { ...store, isGone: async (alive: string) => alive === "alive.b" };
  const ledger = ledgerOn(gone, 0);
  // node-b claimed the key with the same arguments and died.
  const args = createHash("sha256")
    .update(canonicalJson({ id: 1 }))
    .digest("base64url");
  const dead = {
    state: "running",
    tool: "apply",
    args,
    node: "node-b",
    alive: "alive.b",
    at: "2026-01-01T00:00:00.000Z",
  };
  entries.set(keyId("apply", "k"), { revision: 100, operation: "PUT", value: JSON.stringify(dead) });
  faults.push({ kind: "update", landed: true });
  await assert.rejects(
    ledger.once(keyed(new AbortController().signal), async () => assert.fail("ran")),
    /answer was lost/,
  );
  const told: unknown[] = [];
  const repeat = await ledger.once(keyed(new AbortController().signal), async (takeover) => {
    told.push(takeover);
    return { ok: true, output: "recovered" };
  });
  assert.deepEqual(repeat, { ok: true, output: "recovered" });
  assert.deepEqual(told, [{ node: "node-b", startedAt: dead.at }]);
});

function runningOn(node: string) {
  return {
    state: "running",
    tool: "apply",
    node,
    alive: `alive.${node.slice(-1)}`,
    at: "2026-01-01T00:00:00.000Z",
  };
}

test("a key's node unheard for a moment (reconnecting) is not taken over: the repeat waits for its result", async () => {
  const { store, entries } = memoryStore();
  let reconnected = false;
  const ledger = ledgerOn({ ...store, isGone: async () => !reconnected });
  const args = createHash("sha256")
    .update(canonicalJson({ id: 1 }))
    .digest("base64url");
  const id = keyId("apply", "k");
  entries.set(id, {
    revision: 100,
    operation: "PUT",
    value: JSON.stringify({ ...runningOn("node-b"), args }),
  });
  // node-b's connection drops for 300 ms while it runs the key; then it reconnects and records its result.
  setTimeout(() => {
    reconnected = true;
    const done = {
      state: "done",
      tool: "apply",
      args,
      node: "node-b",
      at: "2026-01-01T00:00:01.000Z",
      output: "b's",
    };
    entries.set(id, { revision: 101, operation: "PUT", value: JSON.stringify(done) });
  }, 300);
  const repeat = await ledger.once(keyed(new AbortController().signal, 5000), async () =>
    assert.fail("ran again"),
  );
  assert.deepEqual(repeat, { ok: true, output: "b's" });
});
