/**
 * Exactly once, as a property against an oracle: thousands of random programs (chains of nodes, a loop
 * back, journaled steps that fail and retry, tool calls, approvals, interrupts), each driven to its end
 * through a store that "dies" at a random operation — before the write lands, or after it landed but
 * before the driver heard — as a process killed there would: every later call of that driver hangs.
 * A fresh runner takes the run over (a bare `resume`), answers what is open, and so on until the run
 * ends. The oracle sees every write that landed and every side effect:
 *
 * - a step's function runs only once its `started` record for that attempt has landed;
 * - never again once its `done` record has landed, and at most once per attempt;
 * - every attempt carries the step's one idempotency key;
 * - the run ends with the state, and the tool cards a UI would show, of the same program run without a
 *   crash.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of programs (default 2,000 on the in-memory store, a quarter
 * of it on a SQLite file, an eighth on PostgreSQL); `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  approve,
  createGraph,
  createMemoryStore,
  createRunner,
  type DurableStore,
  END,
  type Graph,
  type JournalRecord,
  type NodeContext,
  tool,
} from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase, seededRandom } from "@tackle/test-support";
import { applyToolCards } from "./helpers.ts";

type Op =
  | { readonly kind: "step"; readonly failures: number }
  | { readonly kind: "tool" }
  | { readonly kind: "approve" }
  | { readonly kind: "interrupt" };

interface Program {
  readonly nodes: readonly (readonly Op[])[];
  /** How many times the last node sends the run back to the first. */
  readonly loops: number;
}

function randomProgram(random: () => number): Program {
  const nodes = Array.from({ length: 1 + Math.floor(random() * 3) }, () =>
    Array.from({ length: 1 + Math.floor(random() * 4) }, (): Op => {
      const pick = random();
      if (pick < 0.45) return { kind: "step", failures: random() < 0.25 ? 1 + Math.floor(random() * 2) : 0 };
      if (pick < 0.75) return { kind: "tool" };
      if (pick < 0.88) return { kind: "approve" };
      return { kind: "interrupt" };
    }),
  );
  return { nodes, loops: random() < 0.3 ? 1 : 0 };
}

/** One side effect, as the oracle saw it happen. */
interface Effect {
  readonly key: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
}

/** What the oracle knows: the journal records that landed, and the effects that ran. */
class Oracle {
  readonly started = new Set<string>();
  readonly done = new Set<string>();
  readonly effects: Effect[] = [];
  readonly idempotencyKeys = new Map<string, string>();
  readonly violations: string[] = [];

  landed(journal: readonly JournalRecord[] | undefined): void {
    for (const record of journal ?? []) {
      if (record.state === "started") this.started.add(`${record.key}#${record.attempt}`);
      if (record.state === "done") this.done.add(record.key);
    }
  }

  effect(key: string, attempt: number, idempotencyKey: string): void {
    if (!this.started.has(`${key}#${attempt}`)) {
      this.violations.push(`${key} attempt ${attempt} ran before its started record landed`);
    }
    if (this.done.has(key)) this.violations.push(`${key} ran again after its done record landed`);
    if (this.effects.some((effect) => effect.key === key && effect.attempt === attempt)) {
      this.violations.push(`${key} attempt ${attempt} ran twice`);
    }
    const known = this.idempotencyKeys.get(key);
    if (known !== undefined && known !== idempotencyKey) {
      this.violations.push(`${key} attempt ${attempt} has idempotency key ${idempotencyKey}, not ${known}`);
    }
    this.idempotencyKeys.set(key, idempotencyKey);
    this.effects.push({ key, attempt, idempotencyKey });
  }
}

type State = { log: readonly string[]; loops: number };

/** The program as a graph; its effects reported to `oracle` (a crash-free reference passes none). */
function graphOf(program: Program, name: string, oracle: () => Oracle | undefined): Graph<State> {
  const graph = createGraph<State>(name);
  for (const [index, ops] of program.nodes.entries()) {
    graph.node(`n${index}`, async (state, ctx) => {
      const log = [...state.log];
      for (const [position, op] of ops.entries()) log.push(await runOp(ctx, op, `${position}`, oracle()));
      const last = index === program.nodes.length - 1;
      return { log, loops: last ? state.loops + 1 : state.loops };
    });
    if (index > 0) graph.edge(`n${index - 1}`, `n${index}`);
  }
  graph.branch(`n${program.nodes.length - 1}`, (state) => (state.loops <= program.loops ? "n0" : END));
  return graph;
}

async function runOp(
  ctx: NodeContext,
  op: Op,
  position: string,
  oracle: Oracle | undefined,
): Promise<string> {
  const where = `${ctx.node}.${ctx.visit}.${position}`;
  const sideEffect = (info: { key: string; attempt: number; idempotencyKey: string }) => {
    oracle?.effect(info.key, info.attempt, info.idempotencyKey);
    return `${where}:ran`;
  };
  switch (op.kind) {
    case "step":
      return ctx.step(
        `step-${position}`,
        (info) => {
          const value = sideEffect(info);
          // Fails its first tries (counted by attempt, so a crash-window re-run counts as one).
          if (info.attempt <= op.failures) throw new Error(`${where} failed try ${info.attempt}`);
          return value;
        },
        { retry: { attempts: op.failures + 1, backoff: () => 0 } },
      );
    case "tool":
      return tool(ctx, `tool-${position}`, { where }, sideEffect);
    case "approve": {
      const answer = await approve(ctx, { title: `approve ${where}`, toolName: "pay", params: { where } });
      if (!answer.approved) return `${where}:declined`;
      return tool(ctx, "pay", { where }, sideEffect);
    }
    case "interrupt":
      return `${where}:${String(await ctx.interrupt({ ask: where }))}`;
  }
}

/** The answer a person gives an open interrupt: the same for the same id, whatever the pass. */
function answerFor(id: string, request: unknown): unknown {
  const approval = (request as { kind?: string } | undefined)?.kind === "approval";
  const even = [...id].reduce((sum, character) => sum + character.charCodeAt(0), 0) % 2 === 0;
  return approval ? { approved: even, ...(even ? {} : { reason: "no" }) } : `answer-${id}`;
}

const never = new Promise<never>(() => {});

/**
 * The store as one process sees it, dying at its `dieAt`-th operation: before the operation reaches
 * the store (`before`), or after it landed (`after`); from then on every call (and every answer still
 * in flight) hangs, as in a killed process. What lands is reported to the oracle.
 */
function dyingStore(base: DurableStore, oracle: Oracle, dieAt: number, mode: "before" | "after") {
  let operations = 0;
  let dead = false;
  let died!: () => void;
  const death = new Promise<"died">((resolve) => {
    died = () => resolve("died");
  });
  const landed = (method: string, args: unknown[], result: unknown) => {
    if (method === "createRun")
      oracle.landed((args[1] as { journal?: JournalRecord[] } | undefined)?.journal);
    if (method === "commit") oracle.landed((args[2] as { journal?: JournalRecord[] }).journal);
    if (method === "claimRun" && result !== undefined) {
      oracle.landed((args[3] as { journal?: JournalRecord[] } | undefined)?.journal);
    }
  };
  const store = new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "close") return value;
      return (...args: unknown[]) => {
        if (dead) return never;
        operations += 1;
        const dying = operations === dieAt;
        if (dying && mode === "before") {
          dead = true;
          died();
          return never;
        }
        return (value as (...parameters: unknown[]) => Promise<unknown>)
          .apply(target, args)
          .then((result) => {
            landed(String(property), args, result);
            if (dying) {
              dead = true;
              died();
            }
            return dead ? never : result;
          });
      };
    },
  });
  return { store, death };
}

/** Drives the program to its end through dying stores; the run's last snapshot and frames. */
async function driveWithCrashes(program: Program, base: DurableStore, seed: number, random: () => number) {
  const oracle = new Oracle();
  const threadId = `t-${seed}`;
  const graph = graphOf(program, `p-${seed}`, () => oracle);
  let deaths = 0;
  for (let incarnation = 0; incarnation < 60; incarnation += 1) {
    // A death at one of the next few operations, less likely as the run goes on, so every run ends.
    const dieAt =
      incarnation < 40 && random() < 0.8 ? 1 + Math.floor(random() * 12) : Number.MAX_SAFE_INTEGER;
    const { store, death } = dyingStore(base, oracle, dieAt, random() < 0.5 ? "before" : "after");
    const runner = createRunner({ store, graphs: [graph], leaseMs: 0, recover: false, maxTakeovers: 1_000 });
    const drive = async () => {
      const run = await store.getRun(threadId);
      if (run === undefined) return runner.start(graph, { log: [], loops: 0 }, { threadId });
      if (run.status !== "paused") return runner.resume(threadId);
      const paused = await runner.get(threadId);
      if (paused === undefined) return assert.fail(`seed ${seed}: the paused run vanished`);
      const answers = Object.fromEntries(
        paused.interrupts.map((open) => [open.id, answerFor(open.id, open.request)]),
      );
      return runner.resume(threadId, answers);
    };
    const outcome = await Promise.race([drive(), death]);
    if (outcome === "died") {
      deaths += 1;
      continue;
    }
    if (outcome.status === "completed") {
      const frames = await base.readFrames(threadId, 0);
      await runner.close();
      return { snapshot: outcome, frames, oracle, deaths };
    }
    if (outcome.status !== "paused")
      assert.fail(`seed ${seed}: the run ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
    await runner.close();
  }
  return assert.fail(`seed ${seed}: the run did not end in 60 incarnations`);
}

/** The same program with no crash, answering every interrupt alike. */
async function driveWithoutCrashes(program: Program, seed: number) {
  const store = createMemoryStore();
  const graph = graphOf(program, `p-${seed}`, () => undefined);
  const runner = createRunner({ store, graphs: [graph], leaseMs: 0, recover: false });
  const threadId = `t-${seed}`;
  let snapshot = await runner.start(graph, { log: [], loops: 0 }, { threadId });
  while (snapshot.status === "paused") {
    const answers = Object.fromEntries(
      snapshot.interrupts.map((open) => [open.id, answerFor(open.id, open.request)]),
    );
    snapshot = await runner.resume(threadId, answers);
  }
  assert.equal(snapshot.status, "completed", `seed ${seed}: the reference run ended ${snapshot.status}`);
  const frames = await store.readFrames(threadId, 0);
  await runner.close();
  return { snapshot, frames };
}

const cardStatuses = (frames: Parameters<typeof applyToolCards>[0]) =>
  Object.fromEntries([...applyToolCards(frames)].map(([id, card]) => [id, card.status]));

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seeds = (count: number, offset: number) =>
  process.env.TACKLE_PROPERTY_SEED === undefined
    ? Array.from({ length: count }, (_, index) => offset + index)
    : [Number(process.env.TACKLE_PROPERTY_SEED)];

async function checkProgram(
  seed: number,
  base: DurableStore,
  totals: { deaths: number; effects: number; reruns: number },
) {
  const random = seededRandom(seed);
  const program = randomProgram(random);
  const reference = await driveWithoutCrashes(program, seed);
  const crashed = await driveWithCrashes(program, base, seed, random);
  assert.deepEqual(crashed.oracle.violations, [], `seed ${seed}: ${JSON.stringify(program)}`);
  assert.deepEqual(crashed.snapshot.state, reference.snapshot.state, `seed ${seed}: the end state differs`);
  assert.deepEqual(
    cardStatuses(crashed.frames),
    cardStatuses(reference.frames),
    `seed ${seed}: the tool cards differ`,
  );
  const keys = new Set(crashed.oracle.effects.map((effect) => effect.key));
  for (const key of keys) assert.ok(crashed.oracle.done.has(key), `seed ${seed}: ${key} never finished`);
  totals.deaths += crashed.deaths;
  totals.effects += crashed.oracle.effects.length;
  totals.reruns += crashed.oracle.effects.length - keys.size;
}

describe("exactly once through random crashes, against an oracle", () => {
  it("in-memory store: every program ends as without a crash, no step run past its record", async () => {
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    const base = createMemoryStore();
    for (const seed of seeds(rounds(2_000), 1)) await checkProgram(seed, base, totals);
    // Most programs die several times on the way: a run of the property that crashed nothing proved nothing.
    if (process.env.TACKLE_PROPERTY_SEED === undefined) {
      assert.ok(totals.deaths > rounds(2_000) && totals.reruns > 0, `only ${JSON.stringify(totals)}`);
    }
    console.log(`# memory: ${JSON.stringify(totals)}`);
  });

  it("SQLite file: the same property on the store users have", async () => {
    const directory = mkdtempSync(join(tmpdir(), "durable-property-"));
    const base = createSqliteStore({ path: join(directory, "runs.sqlite"), synchronous: "normal" });
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    try {
      for (const seed of seeds(Math.ceil(rounds(2_000) / 4), 100_000)) await checkProgram(seed, base, totals);
      console.log(`# sqlite: ${JSON.stringify(totals)}`);
    } finally {
      await base.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("PostgreSQL: the same property on the shared server", async () => {
    const database = await createTestDatabase("durable_property");
    const base = await createPostgresStore({ connectionString: database.url });
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    try {
      for (const seed of seeds(Math.ceil(rounds(2_000) / 8), 200_000)) await checkProgram(seed, base, totals);
      console.log(`# postgres: ${JSON.stringify(totals)}`);
    } finally {
      await base.close();
      await database.drop();
    }
  });
});
