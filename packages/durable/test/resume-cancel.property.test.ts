/**
 * A resume racing a cancel, as a property against an oracle (ADR 0121): two runners over one SQLite
 * file, a run paused for an approval, and at once one runner answers it while the other cancels — in
 * random order, with random delays. Whatever wins, both calls settle within their deadline with the run
 * or a typed error, the run ends completed or cancelled, and the approved call runs at most once: once
 * exactly when the run completed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, DurableError, runIntegratedTool } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { seededRandom } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";

const effects = new Map<string, number>();
const graph = createGraph<{ done?: unknown }>("pay-race").node("pay", async (_state, ctx) => {
  const done = await runIntegratedTool(ctx, "pay", { amount: 1 }, { approve: true }, () => {
    effects.set(ctx.threadId, (effects.get(ctx.threadId) ?? 0) + 1);
    return "paid";
  });
  return { done };
});

const settled = (promise: Promise<unknown>) =>
  Promise.race([
    promise.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
    sleep(10_000, undefined, { ref: false }).then(() => {
      throw new Error("a call did not settle within 10 s");
    }),
  ]);

describe("a resume racing a cancel, as a property", () => {
  it("SQLite file, two runners: completed with one effect, or cancelled; typed errors only", async () => {
    const temp = tempSqliteStore();
    const other = createSqliteStore({ path: temp.path });
    const first = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 10 });
    const second = createRunner({ store: other, graphs: [graph], pollIntervalMs: 10 });
    const outcomes = { completed: 0, cancelled: 0 };
    try {
      for (const seed of seeds(rounds(150), 1)) {
        const random = seededRandom(seed);
        const threadId = `race-${seed}`;
        const paused = await first.start(graph, {}, { threadId });
        assert.equal(paused.status, "paused");
        const id = paused.interrupts[0]?.id as string;
        const [resumer, canceller] = random() < 0.5 ? [first, second] : [second, first];
        const resumeDelay = Math.floor(random() * 3);
        const cancelDelay = Math.floor(random() * 3);
        const [resumed, cancelled] = await Promise.all([
          settled(sleep(resumeDelay).then(() => resumer.resume(threadId, { [id]: true }))),
          settled(sleep(cancelDelay).then(() => canceller.cancel(threadId, "race"))),
        ]);
        await Promise.all([first.idle(), second.idle()]);
        const final = await first.get(threadId);
        const label = `seed ${seed}: ${JSON.stringify({ resumed, cancelled, final: final?.status })}`;
        for (const outcome of [resumed, cancelled])
          if (!outcome.ok) assert.ok(DurableError.isInstance(outcome.error), label);
        const ran = effects.get(threadId) ?? 0;
        assert.ok(final?.status === "completed" || final?.status === "cancelled", label);
        if (final?.status === "completed") {
          assert.equal(ran, 1, label);
          assert.deepEqual(final.state, { done: "paid" }, label);
        } else assert.ok(ran <= 1, label);
        outcomes[final.status as "completed" | "cancelled"]++;
      }
      console.log(`# resume vs cancel: ${JSON.stringify(outcomes)}`);
    } finally {
      await first.close();
      await second.close();
      await temp.cleanup();
    }
  });
});
