/**
 * The admission of one module's calls (ADR 0214) against an oracle: 2,000 random sequences of
 * arrivals, endings and cancels. Never more than `concurrent` run, never more than `waiting` wait,
 * turns go in arrival order, a call past both is refused at once, and a cancelled one leaves the line.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { type Admitted, createAdmission } from "./admission.ts";

describe("createAdmission", () => {
  it("holds its bounds and its order through 2,000 random sequences", async () => {
    for (let seed = 1; seed <= 2_000; seed += 1) {
      const random = seededRandom(seed);
      const limits = { concurrent: 1 + Math.floor(random() * 4), waiting: Math.floor(random() * 4) };
      const admission = createAdmission(limits);
      // The oracle: who runs, who waits (in order), and what each call was told.
      const runningNow = new Set<number>();
      const line: number[] = [];
      const told = new Map<number, Admitted>();
      const controllers = new Map<number, AbortController>();
      const cancelled = new Set<number>();
      for (let step = 0, next = 0; step < 40; step += 1) {
        const pick = random();
        if (pick < 0.5) {
          const id = next++;
          const controller = new AbortController();
          controllers.set(id, controller);
          const answer = admission.admit(controller.signal);
          const expected =
            runningNow.size < limits.concurrent
              ? "admitted"
              : line.length < limits.waiting
                ? "waits"
                : "full";
          if (expected === "admitted") runningNow.add(id);
          if (expected === "waits") line.push(id);
          if (typeof answer === "string") {
            assert.equal(answer, expected, `seed ${seed}: call ${id}`);
            told.set(id, answer);
          } else {
            assert.equal(expected, "waits", `seed ${seed}: call ${id} waits`);
            void answer.then((admitted) => told.set(id, admitted));
          }
        } else if (pick < 0.8 && runningNow.size > 0) {
          const [id] = [...runningNow];
          runningNow.delete(id!);
          admission.release();
          const turn = line.shift();
          if (turn !== undefined) runningNow.add(turn);
        } else if (line.length > 0) {
          const id = line.splice(Math.floor(random() * line.length), 1)[0]!;
          controllers.get(id)!.abort();
          cancelled.add(id);
        }
        await Promise.resolve();
        assert.equal(admission.running, runningNow.size, `seed ${seed}: running`);
        assert.equal(admission.waiting, line.length, `seed ${seed}: waiting`);
        assert.ok(admission.running <= limits.concurrent && admission.waiting <= limits.waiting);
        for (const id of runningNow) {
          if (told.has(id)) assert.equal(told.get(id), "admitted", `seed ${seed}: call ${id} runs`);
        }
      }
      // Once the promises have settled: every call that runs was told so, every cancelled one "aborted".
      await new Promise((resolve) => setImmediate(resolve));
      for (const id of runningNow) assert.equal(told.get(id), "admitted", `seed ${seed}: call ${id}`);
      for (const id of cancelled) assert.equal(told.get(id), "aborted", `seed ${seed}: call ${id}`);
      for (const id of line) assert.equal(told.has(id), false, `seed ${seed}: call ${id} still waits`);
    }
  });

  it("a call that waits past its deadline leaves the line, expired; the next in line keeps its turn", async () => {
    const admission = createAdmission({ concurrent: 1, waiting: 2 });
    const never = new AbortController().signal;
    assert.equal(admission.admit(never), "admitted");
    const expiring = admission.admit(never, 20);
    const patient = admission.admit(never, 60_000);
    assert.equal(await expiring, "expired");
    assert.equal(admission.waiting, 1);
    admission.release();
    assert.equal(await patient, "admitted");
    assert.equal(admission.running, 1);
    admission.release();
    assert.equal(admission.running, 0);
  });

  it("a waiting call whose deadline passed before its timer could fire is not admitted; the next one is", async () => {
    const admission = createAdmission({ concurrent: 1, waiting: 2 });
    const never = new AbortController().signal;
    assert.equal(admission.admit(never), "admitted");
    const spent = admission.admit(never, 10);
    const patient = admission.admit(never, 60_000);
    // The event loop held past the first one's deadline (a tool computing): its timer has not fired
    // when the running call ends.
    const until = performance.now() + 30;
    while (performance.now() < until);
    admission.release();
    assert.equal(await spent, "expired", "its caller's limit was spent in the line");
    assert.equal(await patient, "admitted");
    assert.equal(admission.running, 1);
    assert.equal(admission.waiting, 0);
    admission.release();
    assert.equal(admission.running, 0);
  });

  it("refuses limits that admit nothing", () => {
    assert.throws(() => createAdmission({ concurrent: 0 }), RangeError);
    assert.throws(() => createAdmission({ waiting: -1 }), RangeError);
    assert.equal(createAdmission().limits.concurrent, 256);
  });
});
