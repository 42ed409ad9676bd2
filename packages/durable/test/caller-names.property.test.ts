/**
 * Caller names as a property, against an oracle (ADR 0121): random graphs whose node names, step names,
 * thread ids and state keys are drawn from inherited property names (`toString`, `__proto__`, …), line
 * breaks, unicode and long strings, with step results nested at random depths around the codec's bound.
 * Each visit must see its own visit number and run its own step; the final state and every history
 * checkpoint must equal the oracle's; a value nested past the bound fails the run `not_serializable`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createGraph, createRunner, type DurableStore, END, START } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, seededRandom } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";

const inherited = ["toString", "__proto__", "constructor", "hasOwnProperty", "valueOf", "isPrototypeOf"];
/** Node names are `[A-Za-z0-9_.-]{1,64}`: the inherited ones are among them. */
const nodeNames = [...inherited, "plain", "a.b", "x-1", "_", "N".repeat(64)];
/** Step names, thread ids and state keys: anything a string can hold. */
const freeNames = [
  ...inherited,
  "plain",
  "line\nbreak",
  "crlf\r\nx",
  "slash/and~tilde",
  "ünïcödé ✓ 🚀",
  "\u2028sep",
  "",
  "$t",
  "x".repeat(10_000),
];
const maxDepth = 512;

function nested(depth: number): unknown {
  let value: unknown = "leaf";
  for (let level = 1; level < depth; level++) value = { a: value };
  return depth === 0 ? "flat" : { a: value };
}

function setOwn(record: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
}

interface Visit {
  readonly node: number;
  readonly step: string;
  readonly key: string;
  /** undefined removes the key. */
  readonly value: unknown;
}

interface Case {
  readonly threadId: string;
  readonly nodes: readonly string[];
  readonly visits: readonly Visit[];
  /** The visit whose result nests past the bound, if any. */
  readonly tooDeepAt: number | undefined;
  readonly depths: readonly number[];
}

function randomCase(seed: number): Case {
  const random = seededRandom(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const nodes = [...new Set(Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(nodeNames)))];
  const visits: Visit[] = Array.from({ length: 1 + Math.floor(random() * 6) }, () => ({
    node: Math.floor(random() * nodes.length),
    step: pick(freeNames),
    key: pick(freeNames.filter((name) => name !== "i")),
    value: random() < 0.2 ? undefined : pick([1, "v", { deep: [1, { __x: true }] }, null, "line\nvalue"]),
  }));
  const depths = visits.map(() =>
    random() < 0.15 ? pick([maxDepth - 1, maxDepth, maxDepth + 1, 100_000]) : Math.floor(random() * 20),
  );
  // The step's result holds the nested value one level down.
  const tooDeepAt = depths.findIndex((depth) => depth + 1 > maxDepth);
  return {
    threadId: `${pick(freeNames).slice(0, 200)}#${seed}`,
    nodes,
    visits,
    tooDeepAt: tooDeepAt === -1 ? undefined : tooDeepAt,
    depths,
  };
}

async function checkCase(seed: number, store: DurableStore): Promise<void> {
  const c = randomCase(seed);
  const seen: unknown[] = [];
  const graph = createGraph<Record<string, unknown>>(`names-${seed}`);
  for (const name of c.nodes) {
    graph.node(name, async (state, ctx) => {
      const i = state.i as number;
      const visit = c.visits[i] as Visit;
      const depth = c.depths[i] as number;
      const result = await ctx.step(visit.step, () => ({
        node: ctx.node,
        visit: ctx.visit,
        i,
        deep: nested(depth),
      }));
      seen.push([result.node, result.visit, result.i]);
      const update: Record<string, unknown> = { i: i + 1 };
      setOwn(update, visit.key, visit.value);
      return update;
    });
  }
  graph.edge(START, c.nodes[(c.visits[0] as Visit).node] as string);
  for (const name of c.nodes) {
    graph.branch(name, (state) => {
      const next = c.visits[state.i as number];
      return next === undefined ? END : (c.nodes[next.node] as string);
    });
  }
  const runner = createRunner({ store, graphs: [graph] });
  const run = await runner.start(graph, { i: 0 }, { threadId: c.threadId });

  // The oracle: visit numbers per node, and the state after each visit, keys as own keys.
  const counts = new Map<string, number>();
  const expectedSeen: unknown[] = [];
  const states: Record<string, unknown>[] = [];
  // The run's state keeps a key set to undefined (the codec round-trips it); its history, rebuilt from
  // JSON Patch frames, removes it.
  let state: Record<string, unknown> = { i: 0 };
  let patched: Record<string, unknown> = { i: 0 };
  const last = c.tooDeepAt ?? c.visits.length;
  for (const [i, visit] of c.visits.slice(0, last).entries()) {
    const node = c.nodes[visit.node] as string;
    expectedSeen.push([node, counts.get(node) ?? 0, i]);
    counts.set(node, (counts.get(node) ?? 0) + 1);
    state = { ...state, i: i + 1 };
    setOwn(state, visit.key, visit.value);
    patched = { ...patched, i: i + 1 };
    if (visit.value === undefined) delete patched[visit.key];
    else setOwn(patched, visit.key, visit.value);
    states.push(patched);
  }
  const label = `seed ${seed}: ${JSON.stringify(c.nodes)} ${c.visits.map((v) => JSON.stringify(v.key).slice(0, 20)).join(",")}`;
  assert.deepEqual(seen, expectedSeen, label);
  if (c.tooDeepAt !== undefined) {
    assert.equal(run.status, "failed", label);
    assert.equal(run.error?.code, "not_serializable", label);
  } else {
    assert.equal(run.status, "completed", label);
    assert.deepStrictEqual(run.state, state, label);
  }
  const checkpoints = await runner.history(c.threadId);
  assert.deepStrictEqual(
    checkpoints.slice(1).map((checkpoint) => checkpoint.state),
    states,
    label,
  );
  const stored = await runner.get(c.threadId);
  assert.equal(stored?.threadId, c.threadId, label);
  await runner.close();
}

describe("caller names, as a property", () => {
  it("SQLite: every visit is its own, every state key a key, every deep value refused by name", async () => {
    const temp = tempSqliteStore();
    try {
      for (const seed of seeds(rounds(1_000), 1)) await checkCase(seed, temp.store);
    } finally {
      await temp.cleanup();
    }
  });

  it("PostgreSQL: the same property on the shared server", async () => {
    const database = await createTestDatabase("durable_names");
    const store = await createPostgresStore({ connectionString: database.url });
    try {
      for (const seed of seeds(Math.ceil(rounds(1_000) / 5), 100_000)) await checkCase(seed, store);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
