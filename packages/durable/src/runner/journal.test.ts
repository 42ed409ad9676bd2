import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ToolError } from "@tackle/core";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { createGraph } from "../graph/create-graph.ts";
import { createRunner } from "./create-runner.ts";

/** Records that a step's fn ran, and returns its value. */
function note<T>(log: string[], name: string, value: T): T {
  log.push(name);
  return value;
}

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("ctx.step journal: recording and replay", () => {
  test("SQLite is the default store: a path is enough", async () => {
    const path = temp.path.replace(/runs\.sqlite$/, "default.sqlite");
    const graph = createGraph("default-store").node("a", (_state, ctx) =>
      ctx.step("x", () => ({ done: true })),
    );
    const runner = createRunner({ store: path });
    const result = await runner.start(graph, {}, { threadId: "t" });
    await runner.close();
    assert.equal(result.status, "completed");
    const reader = new DatabaseSync(path, { readOnly: true });
    const row = reader.prepare("SELECT status FROM durable_runs WHERE thread_id = 't'").get() as {
      status: string;
    };
    reader.close();
    assert.equal(row.status, "completed");
  });

  test("a step's record is on disk before the next step starts", async () => {
    const seen: string[] = [];
    const graph = createGraph("durable-before-next").node("a", async (_state, ctx) => {
      await ctx.step("first", () => 41);
      await ctx.step("second", () => {
        // Another connection, as a fresh process after a crash would see the file.
        const reader = new DatabaseSync(temp.path, { readOnly: true });
        const rows = reader.prepare("SELECT name, state, value FROM durable_journal ORDER BY key").all() as {
          name: string;
          state: string;
        }[];
        reader.close();
        seen.push(...rows.map((row) => `${row.name}:${row.state}`));
      });
      return {};
    });
    const result = await createRunner({ store: temp.store }).start(graph, {});
    assert.equal(result.status, "completed");
    assert.deepEqual(seen, ["first:done", "second:started"]);
  });

  test("a resumed node gets recorded values back, falsy ones as themselves, without running fn again", async () => {
    const runs: string[] = [];
    const values: unknown[][] = [];
    const graph = createGraph("falsy").node("n", async (_state, ctx) => {
      const got = [
        await ctx.step("false", () => note(runs, "false", false)),
        await ctx.step("zero", () => note(runs, "zero", 0)),
        await ctx.step("empty", () => note(runs, "empty", "")),
        await ctx.step("null", () => note(runs, "null", null)),
        await ctx.step("undefined", () => {
          runs.push("undefined");
        }),
        await ctx.step("date", () => note(runs, "date", new Date("2026-01-01T00:00:00Z"))),
      ];
      values.push(got);
      await ctx.interrupt({ question: "go on?" });
      return {};
    });
    const runner = createRunner({ store: temp.store, graphs: [graph] });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const fresh = createRunner({ store: temp.reopen(), graphs: [graph] });
    const done = await fresh.resume("t", { [paused.interrupts[0]?.id ?? ""]: "yes" });
    assert.equal(done.status, "completed");
    assert.deepEqual(runs, ["false", "zero", "empty", "null", "undefined", "date"]);
    assert.deepEqual(values[0], values[1]);
    assert.deepEqual(values[1], [false, 0, "", null, undefined, new Date("2026-01-01T00:00:00Z")]);
  });

  test("a different step name at a recorded position fails the run with journal_mismatch, even if the node catches it", async () => {
    let pass = 0;
    let ranAfterMismatch = false;
    const graph = createGraph("mismatch").node("n", async (_state, ctx) => {
      pass++;
      try {
        await ctx.step(pass === 1 ? "charge" : "refund", () => 1);
      } catch {
        // A careless catch must not let the run go on past a mismatch.
      }
      if (pass === 1) await ctx.interrupt("ok?");
      ranAfterMismatch = true;
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const failed = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "journal_mismatch");
    assert.match(failed.error?.message ?? "", /recorded step "charge".*asks for "refund"/);
    assert.equal(ranAfterMismatch, true);
    assert.equal((await runner.get("t"))?.status, "failed");
  });
});

describe("ctx.step journal: failures, errors and nesting", () => {
  test("a record that fails to decode fails the run closed and never re-runs the step", async () => {
    let charges = 0;
    const graph = createGraph("decode").node("n", async (_state, ctx) => {
      await ctx.step("charge", () => ++charges);
      await ctx.interrupt("ok?");
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const database = new DatabaseSync(temp.path);
    database.prepare("UPDATE durable_journal SET value = ? WHERE name = 'charge'").run('{"v":7,"value":1}');
    database.close();
    const failed = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "journal_decode_failed");
    assert.equal(charges, 1);
  });

  test("a result that would not round-trip is refused when recorded, naming it, and the run fails", async () => {
    class Connection {
      open = true;
    }
    const graph = createGraph("refuse").node("n", async (_state, ctx) => {
      await ctx.step("connect", () => ({ connection: new Connection() }));
      return {};
    });
    const failed = await createRunner({ store: temp.store }).start(graph, {});
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "not_serializable");
    assert.match(failed.error?.message ?? "", /step "connect".*connection: an instance of Connection/);
  });

  test("a step's error is journaled and replayed with its class name and code", async () => {
    let attempts = 0;
    const seen: string[] = [];
    const graph = createGraph("errors").node("n", async (_state, ctx) => {
      try {
        await ctx.step("charge", () => {
          attempts++;
          const error = new ToolError("card_declined", "declined");
          error.name = "PaymentError";
          throw error;
        });
      } catch (error) {
        seen.push(`${(error as Error).name}:${(error as ToolError).code}`);
      }
      await ctx.interrupt("retry with another card?");
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: false });
    assert.equal(attempts, 1);
    assert.deepEqual(seen, ["PaymentError:card_declined", "PaymentError:card_declined"]);
  });

  test("steps nested in a step keep their positions when the outer one replays", async () => {
    const calls: string[] = [];
    const graph = createGraph("nested").node("n", async (_state, ctx) => {
      const outer = await ctx.step("outer", async () => {
        calls.push("outer");
        return (await ctx.step("inner", () => note(calls, "inner", 2))) * 10;
      });
      const after = await ctx.step("after", () => note(calls, "after", outer + 1));
      await ctx.interrupt("ok?");
      return { after };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    assert.deepEqual(done.state, { after: 21 });
    assert.deepEqual(calls, ["outer", "inner", "after"]);
  });

  test("the idempotency key is the run id and the step key, attempt 1 on a clean run", async () => {
    const infos: { key: string; attempt: number; seen: string }[] = [];
    const graph = createGraph("keys").node("n", async (_state, ctx) => {
      await ctx.step("a", (info) => {
        infos.push({ key: info.idempotencyKey, attempt: info.attempt, seen: ctx.idempotencyKey });
      });
      return {};
    });
    const done = await createRunner({ store: temp.store }).start(graph, {});
    assert.deepEqual(infos, [{ key: `${done.runId}:n#0/0`, attempt: 1, seen: `${done.runId}:n#0/0` }]);
    assert.equal(applyToolCards([]).size, 0);
  });
});
