/**
 * Approval expiries outlive the runner that paused the run (ADR 0124): a run paused at an approval
 * that expires while its process is down ends, answered as expired, at its time once a runner is up
 * again on the same SQLite file or PostgreSQL database — with no resume call from anyone. Two runners
 * holding the same expiry answer it once. A burst of expiries due at once drives no more runs at once
 * than `maxDrivingRuns`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  approve,
  createGraph,
  createMemoryStore,
  createRunner,
  type DurableStore,
  type Runner,
} from "@tackle/durable";
import { createDurableApp } from "@tackle/durable/http";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";

type Gate = { expiresInMs: number; answer?: Record<string, unknown> };

/** Pauses at an approval; once answered, records the answer and when it came, per thread. */
function gateGraph(effects: Map<string, { answer: unknown; at: number }[]>, holdMs = 0, driving?: Counter) {
  return createGraph<Gate>("expiring-gate").node("ask", async (state, ctx) => {
    const answer = await approve(ctx, { title: "Go on?", params: {}, expiresInMs: state.expiresInMs });
    await ctx.step("effect", async () => {
      driving?.enter();
      try {
        if (holdMs > 0) await sleep(holdMs);
        const list = effects.get(ctx.threadId) ?? [];
        list.push({ answer, at: Date.now() });
        effects.set(ctx.threadId, list);
      } finally {
        driving?.leave();
      }
    });
    return { answer: answer as unknown as Record<string, unknown> };
  });
}

interface Counter {
  enter(): void;
  leave(): void;
  readonly now: number;
  readonly most: number;
}

function counter(): Counter {
  let now = 0;
  let most = 0;
  return {
    enter() {
      now++;
      most = Math.max(most, now);
    },
    leave() {
      now--;
    },
    get now() {
      return now;
    },
    get most() {
      return most;
    },
  };
}

async function until(check: () => Promise<boolean>, what: string, deadlineMs = 15_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** The approval's expiry of a paused run, ms since the epoch. */
async function expiryOf(runner: Runner, threadId: string): Promise<number> {
  const snapshot = await runner.get(threadId);
  assert.equal(snapshot?.status, "paused");
  const request = snapshot?.interrupts[0]?.request as { expiresAt?: string };
  return Date.parse(String(request.expiresAt));
}

/**
 * Pauses a run in a first runner, closes it (a restart), opens a second runner over a fresh store on
 * the same data, and sees the run end answered as expired at its time with no resume call.
 */
async function restartScenario(openStore: () => Promise<DurableStore>, threadId: string): Promise<void> {
  const effects = new Map<string, { answer: unknown; at: number }[]>();
  const graph = gateGraph(effects);
  const firstStore = await openStore();
  const first = createRunner({ store: firstStore, graphs: [graph] });
  await first.start(graph, { expiresInMs: 1500 }, { threadId });
  const expiresAt = await expiryOf(first, threadId);
  await first.close();
  await firstStore.close();

  const store = await openStore();
  const second = createRunner({ store, graphs: [graph] });
  try {
    await until(async () => (await second.get(threadId))?.status === "completed", "the run to end expired");
    const ended = effects.get(threadId) ?? [];
    assert.equal(ended.length, 1, "the approval was answered once");
    const answer = (ended[0]?.answer ?? {}) as { approved?: unknown; expired?: unknown };
    assert.deepEqual(
      { approved: answer.approved, expired: answer.expired },
      { approved: false, expired: true },
    );
    assert.ok((ended[0]?.at ?? 0) >= expiresAt, "not answered before its expiry");
    assert.ok((ended[0]?.at ?? 0) < expiresAt + 5000, "answered at its expiry, not long after");
    const resumed = await second.frames(threadId, { types: ["run_resumed"] });
    assert.equal(resumed.length, 1);
  } finally {
    await second.close();
    await store.close();
  }
}

describe("an approval expiry after a restart", () => {
  test("on a SQLite file: a new runner ends the run as expired at its time", {
    timeout: 30_000,
  }, async () => {
    const temp = tempSqliteStore();
    await temp.store.close();
    try {
      await restartScenario(async () => temp.reopen(), "sqlite-restart");
    } finally {
      await temp.cleanup();
    }
  });

  describe("on PostgreSQL", () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase("tackle_durable_expiry");
    });
    after(async () => {
      await database?.drop();
    });

    test("a new runner ends the run as expired at its time", { timeout: 30_000 }, async () => {
      await restartScenario(() => createPostgresStore({ connectionString: database.url }), "pg-restart");
    });

    test("two runners holding the same expiries answer each once", { timeout: 30_000 }, async () => {
      const effects = new Map<string, { answer: unknown; at: number }[]>();
      const graph = gateGraph(effects, 50);
      const stores = [
        await createPostgresStore({ connectionString: database.url }),
        await createPostgresStore({ connectionString: database.url }),
      ];
      // No lease: a runner that lost the race would take the run over if anything let it.
      const first = createRunner({ store: stores[0] as DurableStore, graphs: [graph], leaseMs: 0 });
      let second: Runner | undefined;
      try {
        const ids = Array.from({ length: 16 }, (_, i) => `pg-twice-${i}`);
        for (const id of ids) await first.start(graph, { expiresInMs: 1200 }, { threadId: id });
        // The first holds them as the runner that paused them; the second loads them from the store.
        second = createRunner({ store: stores[1] as DurableStore, graphs: [graph], leaseMs: 0 });
        await until(async () => {
          const runs = await Promise.all(ids.map((id) => first.get(id)));
          return runs.every((run) => run?.status === "completed");
        }, "every run to end expired");
        await Promise.all([first.idle(), second.idle()]);
        for (const id of ids) {
          assert.equal(effects.get(id)?.length, 1, `${id}: answered once`);
          assert.equal((await first.frames(id, { types: ["run_resumed"] })).length, 1, `${id}: resumed once`);
          assert.equal(
            (await first.frames(id, { types: ["run_recovered"] })).length,
            0,
            `${id}: no takeover`,
          );
        }
      } finally {
        await first.close();
        await second?.close();
        for (const store of stores) await store.close();
      }
    });
  });
});

test("expiries due at once drive no more runs at once than maxDrivingRuns", { timeout: 30_000 }, async () => {
  const effects = new Map<string, { answer: unknown; at: number }[]>();
  const driving = counter();
  const graph = gateGraph(effects, 150, driving);
  const store = createMemoryStore();
  const runner = createRunner({ store, graphs: [graph] });
  const app = createDurableApp({ runner, maxDrivingRuns: 2 });
  try {
    const ids = Array.from({ length: 8 }, (_, i) => `burst-${i}`);
    await Promise.all(ids.map((id) => runner.start(graph, { expiresInMs: 400 }, { threadId: id })));
    // While the expiries hold both places, a start over HTTP is refused as any third run would be.
    await until(async () => driving.now === 2, "the expiries to drive two runs");
    const refused = await app.request("http://127.0.0.1/runs", {
      method: "POST",
      headers: { "content-type": "application/json", host: "127.0.0.1" },
      body: JSON.stringify({ graph: "expiring-gate", input: { expiresInMs: 60_000 }, threadId: "late" }),
    });
    assert.equal(refused.status, 429);
    await until(async () => {
      const runs = await Promise.all(ids.map((id) => runner.get(id)));
      return runs.every((run) => run?.status === "completed");
    }, "every run of the burst to end expired");
    for (const id of ids) {
      assert.equal(effects.get(id)?.length, 1);
      assert.equal((effects.get(id)?.[0]?.answer as { expired?: unknown } | undefined)?.expired, true);
    }
    assert.equal(driving.most, 2, "two at a time, as maxDrivingRuns allows");
  } finally {
    await runner.close();
  }
});

test("a restart with more expiries than it may hold loads them a page at a time and ends each in time", {
  timeout: 30_000,
}, async () => {
  const effects = new Map<string, { answer: unknown; at: number }[]>();
  const graph = gateGraph(effects);
  const temp = tempSqliteStore();
  try {
    const first = createRunner({ store: temp.store, graphs: [graph] });
    const ids = Array.from({ length: 30 }, (_, i) => `many-${String(i).padStart(2, "0")}`);
    const due = new Map<string, number>();
    for (const id of ids) {
      await first.start(graph, { expiresInMs: 1200 }, { threadId: id });
      due.set(id, await expiryOf(first, id));
    }
    await first.close();
    // The store's pages, as the new runner reads them.
    const reopened = temp.reopen();
    const pages: { limit: number; after?: string }[] = [];
    const store: DurableStore = Object.assign(Object.create(reopened) as DurableStore, {
      findExpiringRuns: (query: Parameters<DurableStore["findExpiringRuns"]>[0]) => {
        pages.push({
          limit: query.limit,
          ...(query.after === undefined ? {} : { after: query.after.threadId }),
        });
        return reopened.findExpiringRuns(query);
      },
    });
    const second = createRunner({ store, graphs: [graph], expiries: { pageSize: 4, maxLoaded: 10 } });
    try {
      await until(async () => {
        const runs = await Promise.all(ids.map((id) => second.get(id)));
        return runs.every((run) => run?.status === "completed");
      }, "every run to end expired");
      for (const id of ids) {
        const ended = effects.get(id) ?? [];
        assert.equal(ended.length, 1, id);
        const at = ended[0]?.at ?? 0;
        const expiresAt = due.get(id) ?? 0;
        assert.ok(
          at >= expiresAt && at < expiresAt + 3000,
          `${id}: ended ${at - expiresAt} ms from its expiry`,
        );
      }
      assert.ok(
        pages.every((page) => page.limit <= 4),
        "pages of at most pageSize",
      );
      // The first look stops at maxLoaded: 4, 4, then 2; the next starts when the 10th falls due.
      assert.deepEqual(
        pages.slice(0, 3).map((page) => [page.limit, page.after]),
        [
          [4, undefined],
          [4, "many-03"],
          [2, "many-07"],
        ],
      );
      assert.ok(pages.length > 3, "the rest loaded by later looks");
    } finally {
      await second.close();
    }
  } finally {
    await temp.cleanup();
  }
});
