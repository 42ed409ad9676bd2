/**
 * History pages as a property, against an oracle (ADR 0122): random threads (several runs, each a
 * random walk of state keys added, replaced and removed, values of random size) read over the HTTP
 * app's `GET /runs/:id/history` with random `limit`, `afterSeq` starts and `maxHistoryBytes`. Every page
 * holds at most `limit` checkpoints and at most `maxHistoryBytes` of them (a lone checkpoint larger than
 * the bound goes alone), and the pages, followed by `nextAfterSeq`, give exactly the oracle's
 * checkpoints after the start, in order, each with the state the oracle computed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createGraph, createMemoryStore, createRunner, type DurableStore, END } from "@tackle/durable";
import { createDurableApp } from "@tackle/durable/http";
import { seededRandom } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";

/** One node visit's change: set `key` to a string of `size` characters, or remove it (size null). */
type Op = readonly [key: string, size: number | null];
type State = { plan?: Op[]; i?: number } & Record<string, unknown>;

const keys = ["a", "b", "c", "__proto__", "toString", "d/e~f"];

const walk = createGraph<State>("walk")
  .node("step", (state) => {
    const i = state.i ?? 0;
    const [key, size] = state.plan?.[i] ?? ["a", 1];
    return { i: i + 1, [key]: size === null ? undefined : "y".repeat(size) } as State;
  })
  .branch("step", (state) => ((state.i ?? 0) < (state.plan?.length ?? 0) ? "step" : END));

interface Expected {
  readonly seq: number;
  readonly runId: string;
  readonly node: string | null;
  readonly next: string | null;
  readonly state: Record<string, unknown>;
}

function setOwn(record: Record<string, unknown>, key: string, value: unknown) {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

/** The oracle: the checkpoints a thread of these runs has, computed here, not read from frames. */
function expectedCheckpoints(runs: readonly Op[][], seqs: readonly number[]): Expected[] {
  const expected: Expected[] = [];
  let state: Record<string, unknown> = {};
  let at = 0;
  for (const [index, plan] of runs.entries()) {
    state = { ...state };
    setOwn(state, "plan", plan);
    setOwn(state, "i", 0);
    expected.push({
      seq: seqs[at++] ?? -1,
      runId: `r${index}`,
      node: null,
      next: "step",
      state: { ...state },
    });
    for (const [i, [key, size]] of plan.entries()) {
      setOwn(state, "i", i + 1);
      if (size === null) delete state[key];
      else setOwn(state, key, "y".repeat(size));
      const next = i + 1 < plan.length ? "step" : null;
      expected.push({ seq: seqs[at++] ?? -1, runId: `r${index}`, node: "step", next, state: { ...state } });
    }
  }
  return expected;
}

interface Page {
  checkpoints: { seq: number; runId: string; node: string | null; next: string | null; state: unknown }[];
  nextAfterSeq?: number;
}

async function oneRound(seed: number, store: DurableStore): Promise<{ pages: number; lone: number }> {
  const random = seededRandom(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const runner = createRunner({ store, graphs: [walk], recover: false });
  const maxHistoryBytes = 200 + pick(6000);
  const app = createDurableApp({ runner, maxHistoryBytes });
  const threadId = `t${seed}`;
  const runs = Array.from({ length: 1 + pick(4) }, () =>
    Array.from({ length: 1 + pick(6) }, (): Op => {
      const key = keys[pick(keys.length)] ?? "a";
      return [key, random() < 0.2 ? null : pick(random() < 0.2 ? 4000 : 200)];
    }),
  );
  for (const [index, plan] of runs.entries())
    await runner.start(walk, { plan, i: 0 }, { threadId, runId: `r${index}` });
  // Seqs from the store; everything else about each checkpoint from the oracle.
  const seqs = (await store.readFrames(threadId, 0, 10_000, ["run_started", "node_completed"])).map(
    (frame) => frame.seq,
  );
  const expected = expectedCheckpoints(runs, seqs);
  const start = random() < 0.5 ? 0 : (expected[pick(expected.length)]?.seq ?? 0);
  const limit = 1 + pick(8);
  const got: Page["checkpoints"] = [];
  let afterSeq: number | undefined = start;
  let pages = 0;
  let lone = 0;
  while (afterSeq !== undefined) {
    const response = await app.fetch(
      new Request(`http://127.0.0.1/runs/${threadId}/history?afterSeq=${afterSeq}&limit=${limit}`, {
        headers: { host: "127.0.0.1" },
      }),
    );
    assert.equal(response.status, 200, `seed ${seed}`);
    const page = (await response.json()) as Page;
    pages++;
    assert.ok(page.checkpoints.length <= limit, `seed ${seed}: ${page.checkpoints.length} over ${limit}`);
    const bytes = page.checkpoints.reduce((sum, point) => sum + Buffer.byteLength(JSON.stringify(point)), 0);
    if (page.checkpoints.length > 1) assert.ok(bytes <= maxHistoryBytes, `seed ${seed}: ${bytes} bytes`);
    else if (bytes > maxHistoryBytes) lone++;
    assert.ok(page.nextAfterSeq === undefined || page.nextAfterSeq === page.checkpoints.at(-1)?.seq);
    got.push(...page.checkpoints);
    afterSeq = page.nextAfterSeq;
    assert.ok(pages <= expected.length + 1, `seed ${seed}: the pages never end`);
  }
  const want = expected.filter((point) => point.seq > start);
  assert.equal(got.length, want.length, `seed ${seed}: ${got.length} checkpoints for ${want.length}`);
  for (const [index, point] of want.entries()) {
    const { graph: _graph, ...rest } = got[index] as Page["checkpoints"][number] & { graph?: string };
    assert.deepEqual(rest, JSON.parse(JSON.stringify(point)), `seed ${seed}, checkpoint ${index}`);
    // `__proto__` stays an own key in the answer too (ADR 0121).
    assert.equal(
      Object.hasOwn(rest.state as object, "__proto__"),
      Object.hasOwn(point.state, "__proto__"),
      `seed ${seed}, checkpoint ${index}: __proto__`,
    );
  }
  await runner.idle();
  return { pages, lone };
}

describe("history pages against an oracle", () => {
  it(`in memory: ${rounds(1000)} random threads`, async () => {
    let pages = 0;
    let lone = 0;
    for (const seed of seeds(rounds(1000), 1)) {
      const store = createMemoryStore();
      const tally = await oneRound(seed, store);
      pages += tally.pages;
      lone += tally.lone;
    }
    // The bound was met by splitting pages, and a checkpoint larger than it was answered alone.
    assert.ok(pages > rounds(1000), `${pages} pages`);
    assert.ok(lone > 0 || rounds(1000) < 200, `${lone} lone checkpoints over the bound`);
  });

  it(`on a SQLite file: ${Math.ceil(rounds(1000) / 5)} random threads`, async () => {
    const temp = tempSqliteStore();
    try {
      for (const seed of seeds(Math.ceil(rounds(1000) / 5), 100_000)) await oneRound(seed, temp.store);
    } finally {
      await temp.cleanup();
    }
  });
});
