import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { DurableError } from "../errors/durable-error.ts";
import { createGraph } from "../graph/create-graph.ts";
import { runIntegratedTool } from "../integration/run-integrated-tool.ts";
import { validatePolicies } from "../policy/tool-policy.ts";
import { createPostgresStore } from "../stores/postgres/postgres-store.ts";
import { tool } from "../tool/tool.ts";
import { createRunner } from "./create-runner.ts";
import type { NodeContext } from "./node-context.ts";
import { defaultNonRetryable, delayBefore, nonRetryable } from "./step-policy.ts";

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("step policies: timeouts and named errors", () => {
  test("a try that times out has its signal aborted, fails with step_timeout, and the policy retries it", async () => {
    const seen: { attempt: number; aborted: boolean; reason?: string }[] = [];
    const graph = createGraph("timeout").node("n", async (_state, ctx) => {
      const value = await ctx.step(
        "slow-then-fast",
        async (info) => {
          if (info.attempt === 1) {
            await new Promise<void>((resolve) => info.signal.addEventListener("abort", () => resolve()));
            seen.push({
              attempt: info.attempt,
              aborted: info.signal.aborted,
              reason: (info.signal.reason as DurableError).code,
            });
            return "too late";
          }
          seen.push({ attempt: info.attempt, aborted: info.signal.aborted });
          return "fast";
        },
        { timeoutMs: 50, retry: { attempts: 2, backoff: { initialMs: 1 } } },
      );
      return { value };
    });
    const runner = createRunner({ store: temp.store });
    const done = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(done.status, "completed");
    assert.equal(done.state.value, "fast");
    assert.deepEqual(seen, [
      { attempt: 1, aborted: true, reason: "step_timeout" },
      { attempt: 2, aborted: false },
    ]);
    const journal = await temp.store.readJournal("t");
    const failedTry = journal.find((record) => record.key === "n#0/0@1");
    assert.equal(failedTry?.state, "failed");
    assert.match(failedTry?.value ?? "", /step_timeout/);
    assert.deepEqual(
      journal.filter((record) => record.key === "n#0/0").map((record) => [record.state, record.attempt]),
      [["done", 2]],
    );
  });

  test("without retries a timeout fails the step with a coded, retryable error", async () => {
    let caught: unknown;
    const graph = createGraph("timeout-once").node("n", async (_state, ctx) => {
      try {
        await ctx.step(
          "hang",
          (info) => new Promise((resolve) => info.signal.addEventListener("abort", resolve)),
          {
            timeoutMs: 30,
          },
        );
      } catch (error) {
        caught = error;
      }
      return {};
    });
    await createRunner({ store: temp.store }).start(graph, {}, { threadId: "t" });
    assert.ok(DurableError.isInstance(caught));
    assert.equal(caught.code, "step_timeout");
    assert.equal(caught.retryable, true);
  });

  test("errors the policy does not name are not retried; named ones are, up to attempts", async () => {
    const tries = { bad: 0, flaky: 0 };
    const graph = createGraph("which").node("n", async (_state, ctx) => {
      const bad = await ctx
        .step(
          "bad-request",
          () => {
            tries.bad++;
            throw Object.assign(new Error("400 bad request"), { status: 400 });
          },
          { retry: { attempts: 3, backoff: { initialMs: 1 } } },
        )
        .catch((error: Error) => error.message);
      const flaky = await ctx
        .step(
          "flaky",
          () => {
            tries.flaky++;
            throw Object.assign(new Error("conflict"), { code: "lock_busy" });
          },
          { retry: { attempts: 3, backoff: () => 1, retryOn: ["lock_busy"] } },
        )
        .catch((error: Error) => error.message);
      return { bad, flaky };
    });
    const done = await createRunner({ store: temp.store }).start(graph, {}, { threadId: "t" });
    assert.deepEqual(tries, { bad: 1, flaky: 3 });
    assert.deepEqual(done.state, { bad: "400 bad request", flaky: "conflict" });
    const journal = await temp.store.readJournal("t");
    assert.deepEqual(
      journal
        .filter((record) => record.key.startsWith("n#0/1"))
        .map((record) => [record.key, record.state, record.attempt])
        .sort(),
      [
        ["n#0/1", "failed", 3],
        ["n#0/1@1", "failed", 1],
        ["n#0/1@2", "failed", 2],
      ],
    );
  });
});

describe("step policies: tool-level defaults and plain errors", () => {
  test("tool-level defaults: tool() options and a plain-data integration policy retry the call", async () => {
    let direct = 0;
    let integrated = 0;
    const policies = validatePolicies({
      lookup: { retry: { attempts: 2, backoff: { initialMs: 1 }, retryOn: [503] }, timeoutMs: 1000 },
    });
    const graph = createGraph("tools").node("n", async (_state, ctx) => {
      const a = await tool(
        ctx,
        "direct",
        {},
        () => {
          direct++;
          if (direct === 1) throw Object.assign(new Error("503"), { status: 503 });
          return "ok";
        },
        { retry: { attempts: 2, backoff: { initialMs: 1 } } },
      );
      const b = await runIntegratedTool(ctx, "lookup", { q: 1 }, policies.lookup ?? {}, () => {
        integrated++;
        if (integrated === 1) throw Object.assign(new Error("503"), { status: 503 });
        return "found";
      });
      return { a, b };
    });
    const runner = createRunner({ store: temp.store });
    const done = await runner.start(graph, {}, { threadId: "t" });
    assert.deepEqual(done.state, { a: "ok", b: "found" });
    const cards = applyToolCards(await runner.frames("t"));
    assert.deepEqual(
      [...cards.values()].map((card) => [card.status, card.attempt]),
      [
        ["completed", 2],
        ["completed", 2],
      ],
    );
  });

  test("a policy retries a plain Error (3 tries unless it says), each failed try journaled", async () => {
    let tries = 0;
    const graph = createGraph("plain").node("n", async (_state, ctx) => {
      const value = await ctx.step(
        "flaky",
        (info) => {
          tries++;
          if (info.attempt < 3) throw new Error(`boom ${info.attempt}`);
          return "third time";
        },
        { retry: { backoff: { initialMs: 1 } } },
      );
      return { value };
    });
    const done = await createRunner({ store: temp.store }).start(graph, {}, { threadId: "t" });
    assert.deepEqual([done.status, done.state.value, tries], ["completed", "third time", 3]);
    const journal = await temp.store.readJournal("t");
    assert.deepEqual(journal.map((record) => [record.key, record.state, record.attempt]).sort(), [
      ["n#0/0", "done", 3],
      ["n#0/0@1", "failed", 1],
      ["n#0/0@2", "failed", 2],
    ]);
    assert.match(journal.find((record) => record.key === "n#0/0@2")?.value ?? "", /boom 2/);
  });

  test("nonRetryable(), a policy's list of codes and the default list each stop the retries at once", async () => {
    const tries = { marked: 0, listed: 0, notFound: 0, invalid: 0 };
    const attempt = (ctx: NodeContext, name: keyof typeof tries, error: () => unknown, codes?: string[]) =>
      ctx
        .step(
          name,
          () => {
            tries[name]++;
            throw error();
          },
          {
            retry: {
              attempts: 5,
              backoff: { initialMs: 1 },
              ...(codes === undefined ? {} : { nonRetryable: codes }),
            },
          },
        )
        .catch((caught: Error) => caught.message);
    const graph = createGraph("never").node("n", async (_state, ctx) => ({
      marked: await attempt(ctx, "marked", () => nonRetryable(new Error("card declined"))),
      listed: await attempt(
        ctx,
        "listed",
        () => Object.assign(new Error("no such order"), { code: "no_order" }),
        ["no_order"],
      ),
      notFound: await attempt(ctx, "notFound", () => Object.assign(new Error("404"), { status: 404 })),
      invalid: await attempt(ctx, "invalid", () => new DurableError("invalid_policy", "bad")),
    }));
    const done = await createRunner({ store: temp.store }).start(graph, {}, { threadId: "t" });
    assert.deepEqual(tries, { marked: 1, listed: 1, notFound: 1, invalid: 1 });
    assert.equal((done.state as { marked: string }).marked, "card declined");
    assert.ok(defaultNonRetryable.includes(404) && !defaultNonRetryable.includes(503));
  });
});

describe("step policies: runner defaults, backoff and validation", () => {
  test("the runner's retry policy covers steps that give none; a step's own policy wins", async () => {
    const tries = { bare: 0, own: 0 };
    const graph = createGraph("defaults").node("n", async (_state, ctx) => {
      const bare = await ctx.step("bare", (info) => {
        tries.bare++;
        if (info.attempt === 1) throw new Error("transient");
        return "ok";
      });
      const own = await ctx
        .step(
          "own",
          () => {
            tries.own++;
            throw new Error("always");
          },
          { retry: { attempts: 1 } },
        )
        .catch(() => "gave up");
      return { bare, own };
    });
    const runner = createRunner({ store: temp.store, retry: { backoff: { initialMs: 1 } } });
    const done = await runner.start(graph, {}, { threadId: "t" });
    assert.deepEqual(done.state, { bare: "ok", own: "gave up" });
    assert.deepEqual(tries, { bare: 2, own: 1 });
    assert.throws(
      () => createRunner({ store: temp.store, retry: { jitter: 2 } }),
      (error: unknown) => DurableError.isInstance(error) && error.code === "invalid_policy",
    );
  });

  test("backoff doubles up to its cap, and jitter spreads each wait below it", () => {
    const policy = { backoff: { initialMs: 100, factor: 2, maxMs: 1000 }, jitter: 0 };
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((attempt) => delayBefore(policy, attempt)),
      [100, 200, 400, 800, 1000],
    );
    const draws = Array.from({ length: 5000 }, () => delayBefore({ backoff: { initialMs: 1000 } }, 1));
    assert.ok(
      draws.every((delay) => delay >= 500 && delay <= 1000),
      "within [delay × 0.5, delay]",
    );
    const spread = Math.max(...draws) - Math.min(...draws);
    assert.ok(spread > 400, `draws spread over the window (spread ${spread})`);
    assert.ok(new Set(draws).size > 100, "not a handful of values");
  });

  test("a malformed policy is refused with invalid_policy", async () => {
    assert.throws(
      () => validatePolicies({ x: { retry: { attempts: 0 } } }),
      (error: unknown) => DurableError.isInstance(error) && error.code === "invalid_policy",
    );
    const graph = createGraph("bad-policy").node("n", async (_state, ctx) => {
      await ctx.step("s", () => 1, { timeoutMs: -5 });
      return {};
    });
    const failed = await createRunner({ store: temp.store }).start(graph, {}, { threadId: "t" });
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "invalid_policy");
  });
});

test("the runner refuses a store that is a promise, saying to await it", async () => {
  const pending = createPostgresStore({ connectionString: "postgres://127.0.0.1:1/none" });
  pending.catch(() => {});
  assert.throws(
    // biome-ignore lint/suspicious/noExplicitAny: the mistake under test
    () => createRunner({ store: pending as any }),
    (error: unknown) =>
      DurableError.isInstance(error) && error.code === "invalid_store" && /await/.test(error.message),
  );
});
