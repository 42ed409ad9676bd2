/**
 * Approval expiries across restarts, as a property against an oracle (ADR 0124): random programs of
 * pauses at approvals with short expiries, answers, cancels, runner restarts (one or two runners on the
 * store at once) and waits. Every approval nobody answered or cancelled in time ends answered as expired
 * exactly once, at its time, with no resume call; an answered approval is never answered as expired;
 * no run is resumed twice.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  approve,
  createGraph,
  createMemoryStore,
  createRunner,
  DurableError,
  type Runner,
} from "@tackle/durable";
import { seededRandom } from "@tackle/test-support";
import { rounds, seeds } from "./property-programs.ts";

type Gate = { expiresInMs: number; answer?: unknown };
type Answer = { approved?: boolean; expired?: boolean };

const effects = new Map<string, { answer: Answer; at: number }[]>();
/** What the programs exercised, printed at the end. */
const totals = { runs: 0, expired: 0, answered: 0, cancelled: 0, restarts: 0, latestMs: 0 };
const graph = createGraph<Gate>("expiry-property").node("ask", async (state, ctx) => {
  const answer = (await approve(ctx, {
    title: "Go on?",
    params: {},
    expiresInMs: state.expiresInMs,
  })) as Answer;
  await ctx.step("effect", () => {
    const list = effects.get(ctx.threadId) ?? [];
    list.push({ answer, at: Date.now() });
    effects.set(ctx.threadId, list);
  });
  return { answer };
});

interface Expected {
  readonly expiresAt: number;
  readonly interruptId: string;
  /** The answer a resume call had accepted, if any. */
  answered?: boolean;
  cancelled?: boolean;
}

/** What a call racing the expiry may meet: the expiry answered it first, or it ended. */
const lostToExpiry = new Set([
  "approval_expired",
  "run_not_paused",
  "answer_conflict",
  "run_cancelled",
  "run_active",
]);

async function outcome(call: Promise<unknown>): Promise<{ ok: true } | { ok: false; code: string }> {
  try {
    await call;
    return { ok: true };
  } catch (error) {
    assert.ok(DurableError.isInstance(error), `an untyped error: ${String(error)}`);
    return { ok: false, code: error.code };
  }
}

async function runProgram(seed: number): Promise<void> {
  const random = seededRandom(seed);
  const store = createMemoryStore();
  const open = () => createRunner({ store, graphs: [graph], expiries: { everyMs: 100 } });
  const runners: Runner[] = [open()];
  const pick = () => runners[Math.floor(random() * runners.length)] as Runner;
  const expected = new Map<string, Expected>();
  const steps = 6 + Math.floor(random() * 14);
  for (let step = 0; step < steps; step++) {
    const roll = random();
    const threads = [...expected.keys()];
    const someThread = threads[Math.floor(random() * threads.length)];
    if (roll < 0.3 || someThread === undefined) {
      const threadId = `s${seed}-t${step}`;
      const paused = await pick().start(
        graph,
        { expiresInMs: 20 + Math.floor(random() * 300) },
        { threadId },
      );
      assert.equal(paused.status, "paused");
      const entry = paused.interrupts[0];
      const expiresAt = Date.parse(String((entry?.request as { expiresAt?: string } | undefined)?.expiresAt));
      expected.set(threadId, { expiresAt, interruptId: String(entry?.id) });
      totals.runs++;
    } else if (roll < 0.45) {
      const entry = expected.get(someThread) as Expected;
      const approved = random() < 0.5;
      const result = await outcome(pick().resume(someThread, { [entry.interruptId]: { approved } }));
      if (result.ok) entry.answered = approved;
      else assert.ok(lostToExpiry.has(result.code), `seed ${seed}: answer refused ${result.code}`);
    } else if (roll < 0.55) {
      const entry = expected.get(someThread) as Expected;
      const result = await outcome(pick().cancel(someThread));
      if (result.ok) entry.cancelled = true;
      else assert.equal(result.code, "run_not_active", `seed ${seed}: cancel refused ${result.code}`);
    } else if (roll < 0.75) {
      // A restart: a runner goes (closed, as a deploy does) and a new one comes up, or a second joins.
      totals.restarts++;
      if (runners.length === 2 || random() < 0.6) {
        const gone = runners.splice(Math.floor(random() * runners.length), 1)[0] as Runner;
        if (random() < 0.5) runners.push(open());
        await gone.close();
        if (runners.length === 0) runners.push(open());
      } else runners.push(open());
    } else await sleep(Math.floor(random() * 150));
  }
  await settle(seed, runners[0] as Runner, expected);
  for (const runner of runners) await runner.close();
  await check(seed, runners[0] as Runner, expected);
}

/** Waits (with a deadline) until no run the oracle knows is paused or running any more. */
async function settle(seed: number, runner: Runner, expected: Map<string, Expected>): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const runs = await Promise.all([...expected.keys()].map((threadId) => runner.get(threadId)));
    if (runs.every((run) => run?.status === "completed" || run?.status === "cancelled")) return;
    const left = runs.filter((run) => run?.status === "paused" || run?.status === "running");
    assert.ok(Date.now() < deadline, `seed ${seed}: ${left.length} runs never ended: expiries lost`);
    await sleep(20);
  }
}

async function check(seed: number, runner: Runner, expected: Map<string, Expected>): Promise<void> {
  for (const [threadId, entry] of expected) {
    const where = `seed ${seed}, ${threadId}`;
    const status = (await runner.get(threadId))?.status;
    const done = effects.get(threadId) ?? [];
    assert.ok(done.length <= 1, `${where}: the approval was answered ${done.length} times`);
    assert.ok(
      (await runner.frames(threadId, { types: ["run_resumed"] })).length <= 1,
      `${where}: resumed twice`,
    );
    const answer = done[0]?.answer;
    if (entry.answered !== undefined) {
      // Answered in time: never answered as expired.
      assert.notEqual(answer?.expired, true, `${where}: answered, then expired`);
      if (status === "completed") assert.equal(answer?.approved, entry.answered, `${where}: not its answer`);
      totals.answered++;
      continue;
    }
    if (entry.cancelled === true) {
      assert.equal(status, "cancelled", where);
      assert.ok(answer === undefined || answer.expired === true, `${where}: cancelled, yet answered`);
      totals.cancelled++;
      continue;
    }
    // Nobody answered: it ended answered as expired, once, at its time.
    assert.equal(status, "completed", `${where}: not ended by its expiry`);
    assert.equal(answer?.expired, true, `${where}: not answered as expired`);
    assert.equal(answer?.approved, false, where);
    const at = done[0]?.at ?? 0;
    assert.ok(at >= entry.expiresAt, `${where}: expired ${entry.expiresAt - at} ms early`);
    assert.ok(at <= entry.expiresAt + 3000, `${where}: expired ${at - entry.expiresAt} ms late`);
    totals.expired++;
    totals.latestMs = Math.max(totals.latestMs, at - entry.expiresAt);
  }
}

test("expiries across restarts agree with an oracle", { timeout: 300_000 }, async () => {
  for (const seed of seeds(rounds(20), 1)) await runProgram(seed);
  console.log(`# expiries: ${JSON.stringify(totals)}`);
});
