/** One suite every store passes: the same behaviour from memory, SQLite and PostgreSQL. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  approve,
  createGraph,
  createRunner,
  DurableError,
  type DurableStore,
  type ExpiringRun,
  type RunRecord,
  tool,
} from "@tackle/durable";

export interface StoreHarness {
  readonly store: DurableStore;
  /** A second handle on the same storage, as a fresh process would open it. */
  reopen(): Promise<DurableStore>;
  cleanup(): Promise<void>;
}

function record(threadId: string, owner = "owner-1"): RunRecord {
  const now = new Date().toISOString();
  return {
    threadId,
    runId: `run-${threadId}`,
    graph: "g",
    status: "running",
    state: '{"v":1,"value":{}}',
    node: "a",
    cursor: '{"v":1,"value":{"visits":{},"tools":{}}}',
    interrupts: '{"v":1,"value":[]}',
    error: null,
    owner,
    createdAt: now,
    updatedAt: now,
  };
}

export function storeConformance(name: string, open: () => Promise<StoreHarness>): void {
  describe(`store conformance: ${name}`, () => {
    let harness: StoreHarness;
    before(async () => {
      harness = await open();
    });
    after(async () => {
      await harness.cleanup();
    });
    const opened = () => harness;
    runTests(opened);
    expiryTests(opened);
    commitTests(opened);
    openCountTests(opened);
    runnerTests(name, opened);
  });
}

/** Creating runs, reading them back, and finding the stale ones. */
function runTests(opened: () => StoreHarness): void {
  test("a run is stored once; a second run on the thread is refused and the first is kept", async () => {
    const { store } = opened();
    await store.createRun(record("t-create"), {
      frames: [{ type: "run_started", seq: 1, data: { a: 1 } }],
    });
    await assert.rejects(
      store.createRun({ ...record("t-create"), graph: "other" }),
      (error) => DurableError.isInstance(error) && error.code === "thread_exists",
    );
    const stored = await store.getRun("t-create");
    assert.equal(stored?.graph, "g");
    assert.deepEqual(await store.readFrames("t-create", 0), [
      { type: "run_started", seq: 1, data: { a: 1 } },
    ]);
    assert.equal(await store.getRun("missing"), undefined);
  });

  test("findStaleRuns: running runs of the given graphs silent for the lease, longest silent first", async () => {
    const { store } = opened();
    for (const id of ["t-stale-a", "t-stale-b", "t-stale-c"]) {
      await store.createRun({ ...record(id), graph: "stale-g" });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await store.createRun({ ...record("t-stale-paused"), graph: "stale-g", status: "paused" });
    await store.createRun({ ...record("t-stale-other"), graph: "stale-other" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A write (a heartbeat) vouches for b again.
    await store.commit("t-stale-b", "owner-1", {});
    const query = { staleAfterMs: 200, graphs: ["stale-g"], limit: 10 };
    assert.deepEqual(await store.findStaleRuns(query), ["t-stale-a", "t-stale-c"]);
    assert.deepEqual(await store.findStaleRuns({ ...query, limit: 1 }), ["t-stale-a"]);
    assert.deepEqual(await store.findStaleRuns({ ...query, graphs: ["stale-g", "stale-other"] }), [
      "t-stale-a",
      "t-stale-c",
      "t-stale-other",
    ]);
    assert.deepEqual(await store.findStaleRuns({ ...query, staleAfterMs: 60_000 }), []);
  });
}

/** Paused runs' approval expiries, a page at a time, soonest first (ADR 0124). */
function expiryTests(opened: () => StoreHarness): void {
  test("findExpiringRuns: paused runs of the given graphs due by a time, soonest first, in pages", async () => {
    const { store } = opened();
    const pause = async (threadId: string, expiresAt: number | null, graph = "exp-g") => {
      await store.createRun({ ...record(threadId), graph });
      await store.commit(threadId, "owner-1", { run: { status: "paused", expiresAt } });
    };
    await pause("t-exp-c", 3000);
    await pause("t-exp-a", 1000);
    await pause("t-exp-b2", 2000);
    await pause("t-exp-b1", 2000);
    await pause("t-exp-late", 9000);
    await pause("t-exp-none", null);
    await pause("t-exp-other", 1500, "exp-other");
    // Resumed: its expiry no longer counts, though the column keeps its last value.
    await pause("t-exp-resumed", 500);
    await store.claimRun("t-exp-resumed", "owner-2", ["paused"], { run: { status: "running" } });
    const query = { dueBy: 5000, graphs: ["exp-g"], limit: 10 };
    const all = await store.findExpiringRuns(query);
    assert.deepEqual(all, [
      { threadId: "t-exp-a", expiresAt: 1000 },
      { threadId: "t-exp-b1", expiresAt: 2000 },
      { threadId: "t-exp-b2", expiresAt: 2000 },
      { threadId: "t-exp-c", expiresAt: 3000 },
    ]);
    const first = await store.findExpiringRuns({ ...query, limit: 2 });
    assert.deepEqual(first, all.slice(0, 2));
    const page = (after: ExpiringRun | undefined, limit = 10) =>
      store.findExpiringRuns({ ...query, limit, ...(after === undefined ? {} : { after }) });
    assert.deepEqual(await page(first[1], 2), all.slice(2, 4));
    assert.deepEqual(await page(all[3]), []);
    assert.deepEqual(
      (await store.findExpiringRuns({ ...query, graphs: ["exp-g", "exp-other"] })).map((run) => run.threadId),
      ["t-exp-a", "t-exp-other", "t-exp-b1", "t-exp-b2", "t-exp-c"],
    );
    // A pause writes its expiry anew; one with none leaves the run out.
    await store.commit("t-exp-a", "owner-1", { run: { expiresAt: null } });
    assert.equal((await store.findExpiringRuns(query))[0]?.threadId, "t-exp-b1");
  });
}

/** Commits, fencing and claims. */
function commitTests(opened: () => StoreHarness): void {
  test("commits append frames in seq order, upsert journal records and patch the run", async () => {
    const { store } = opened();
    await store.createRun(record("t-commit"));
    await store.commit("t-commit", "owner-1", {
      frames: [
        { type: "x", seq: 1, data: { n: 1 } },
        { type: "x", seq: 2, data: { n: 2 } },
      ],
      journal: [{ key: "a#0/0", name: "s", state: "started", attempt: 1, value: null }],
    });
    await store.commit("t-commit", "owner-1", {
      frames: [{ type: "y", seq: 3, data: null }],
      journal: [{ key: "a#0/0", name: "s", state: "done", attempt: 1, value: '{"v":1,"value":false}' }],
      run: { status: "paused", node: null },
    });
    assert.deepEqual(
      (await store.readFrames("t-commit", 1)).map((frame) => frame.seq),
      [2, 3],
    );
    assert.deepEqual(
      (await store.readFrames("t-commit", 0, 2)).map((frame) => frame.seq),
      [1, 2],
    );
    assert.deepEqual(await store.readJournal("t-commit"), [
      { key: "a#0/0", name: "s", state: "done", attempt: 1, value: '{"v":1,"value":false}' },
    ]);
    const run = await store.getRun("t-commit");
    assert.equal(run?.status, "paused");
    assert.equal(run?.node, null);
  });

  test("a commit by a fenced-out owner is refused and writes nothing", async () => {
    const { store } = opened();
    await store.createRun(record("t-fence"));
    const claimed = await store.claimRun("t-fence", "owner-2", ["running"]);
    assert.equal(claimed?.run.owner, "owner-2");
    await assert.rejects(
      store.commit("t-fence", "owner-1", {
        frames: [{ type: "late", seq: 1, data: null }],
        journal: [{ key: "k", name: "s", state: "done", attempt: 1, value: null }],
      }),
      (error) => DurableError.isInstance(error) && error.code === "run_fenced",
    );
    assert.deepEqual(await store.readFrames("t-fence", 0), []);
    assert.deepEqual(await store.readJournal("t-fence"), []);
  });

  test("a batch reusing a frame seq is refused whole", async () => {
    const { store } = opened();
    await store.createRun(record("t-seq"), { frames: [{ type: "a", seq: 1, data: null }] });
    await assert.rejects(
      store.commit("t-seq", "owner-1", {
        frames: [{ type: "b", seq: 1, data: null }],
        journal: [{ key: "k", name: "s", state: "done", attempt: 1, value: null }],
      }),
    );
    assert.deepEqual(await store.readJournal("t-seq"), []);
    assert.equal((await store.readFrames("t-seq", 0)).length, 1);
  });

  test("claiming checks the status and reports the last seq", async () => {
    const { store } = opened();
    await store.createRun(record("t-claim"), { frames: [{ type: "a", seq: 1, data: null }] });
    await store.commit("t-claim", "owner-1", {
      frames: [{ type: "b", seq: 2, data: null }],
      run: { status: "paused" },
    });
    assert.equal(await store.claimRun("t-claim", "owner-3", ["running"]), undefined);
    const claimed = await store.claimRun("t-claim", "owner-3", ["paused"], { run: { status: "running" } });
    assert.equal(claimed?.lastSeq, 2);
    assert.equal(claimed?.run.status, "running");
    await assert.rejects(
      store.claimRun("missing", "x", ["running"]),
      (error) => DurableError.isInstance(error) && error.code === "not_found",
    );
  });

  test("a claim made from an old reading of the run (ifOwner) is refused once another claim took it", async () => {
    const { store } = opened();
    await store.createRun(record("t-if-owner"), { frames: [{ type: "a", seq: 1, data: null }] });
    await store.commit("t-if-owner", "owner-1", { run: { status: "paused" } });
    const first = await store.claimRun("t-if-owner", "owner-2", ["paused"], {}, { ifOwner: "owner-1" });
    assert.equal(first?.run.owner, "owner-2");
    await store.commit("t-if-owner", "owner-2", { run: { status: "paused" } });
    // Paused again, by another owner: the claim that read owner-1 writes nothing.
    const late = await store.claimRun(
      "t-if-owner",
      "owner-3",
      ["paused"],
      { journal: [{ key: "answer:x", name: "answer", state: "done", attempt: 1, value: "late" }] },
      { ifOwner: "owner-1" },
    );
    assert.equal(late, undefined);
    assert.deepEqual(await store.readJournal("t-if-owner"), []);
    assert.equal((await store.getRun("t-if-owner"))?.owner, "owner-2");
  });
}

/**
 * The open-runs counter (ADR 0127) through every write that opens or ends a run: a start under a limit
 * takes a place (refused past it, nothing stored), a pause or resume keeps it, an ending commit, a claim
 * that ends the run, a delete and a prune give it back once, a reopening claim takes one again, and a
 * run started without a limit takes none. `recountOpenRuns` agrees with the counter at each step.
 */
function openCountTests(opened: () => StoreHarness): void {
  test("open-runs counter: kept by starts, ends, claims, deletes and prunes, and refused past the bound", async () => {
    const { store } = opened();
    const limit = { openLimit: { prefix: "count/", max: 2 } };
    const counted = async () => {
      const found = (await store.recountOpenRuns()).find((count) => count.prefix === "count/");
      assert.equal(found?.counter, found?.recounted, "the counter agrees with a recount");
      return found?.counter ?? 0;
    };
    const tooMany = (error: unknown) => DurableError.isInstance(error) && error.code === "too_many_open_runs";
    await store.createRun(record("count/a"), {}, limit);
    await store.createRun(record("count/b"), {}, limit);
    await store.createRun(record("count/free"));
    assert.equal(await counted(), 2);
    await assert.rejects(store.createRun(record("count/c"), {}, limit), tooMany);
    assert.equal(await store.getRun("count/c"), undefined);
    // A pause and a resume keep the place; an ending commit gives it back, and only once.
    await store.commit("count/a", "owner-1", { run: { status: "paused" } });
    await store.claimRun("count/a", "owner-2", ["paused"], { run: { status: "running" } });
    assert.equal(await counted(), 2);
    await store.commit("count/a", "owner-2", { run: { status: "completed" } });
    await store.commit("count/a", "owner-2", { run: { status: "failed" } });
    assert.equal(await counted(), 1);
    // A claim that reopens the ended thread under the limit takes a place, refused past it.
    await store.createRun(record("count/c"), {}, limit);
    await assert.rejects(
      store.claimRun("count/a", "owner-3", ["completed", "failed"], { run: { status: "running" } }, limit),
      tooMany,
    );
    assert.equal((await store.getRun("count/a"))?.status, "failed");
    // A claim that ends a run (a cancel) gives its place back; the reopening claim then passes.
    await store.claimRun("count/b", "owner-3", ["running"], { run: { status: "cancelled" } });
    await store.claimRun("count/a", "owner-3", ["failed"], { run: { status: "running" } }, limit);
    assert.equal(await counted(), 2);
    // A delete and a prune give the places of open runs back; ended ones held none.
    assert.equal(await store.deleteThread("count/a"), true);
    assert.equal(await counted(), 1);
    const pruned = await store.pruneThreads({
      prefix: "count/",
      updatedBefore: "9999",
      statuses: ["running", "cancelled"],
    });
    assert.deepEqual(pruned.sort(), ["count/b", "count/c", "count/free"]);
    assert.equal(await counted(), 0);
  });
}

/** Runners over the store: a paused run resumed from a fresh handle, and two runners racing on one. */
function runnerTests(name: string, opened: () => StoreHarness): void {
  test("a run paused in one runner resumes in a fresh one, and its tool ran once", async () => {
    const harness = opened();
    const { store } = harness;
    let lookups = 0;
    const graph = createGraph<{ id: string; reply?: string }>(`refund-${name}`).node(
      "refund",
      async (state, ctx) => {
        const order = await tool(ctx, "get_order", { id: state.id }, () => {
          lookups++;
          return { total: 249.9, placed: new Date("2026-01-02T03:04:05Z") };
        });
        const answer = await approve(ctx, { title: "Refund?", params: order });
        return {
          reply: answer.approved ? `refunded ${order.total} from ${order.placed.toISOString()}` : "kept",
        };
      },
    );
    const first = createRunner({ store, graphs: [graph] });
    const paused = await first.start(graph, { id: "ORD-42" }, { threadId: "t-flow" });
    assert.equal(paused.status, "paused");
    const fresh = createRunner({ store: await harness.reopen(), graphs: [graph] });
    const done = await fresh.resume("t-flow", { [paused.interrupts[0]?.id ?? ""]: { approved: true } });
    assert.equal(done.status, "completed");
    assert.equal(done.state.reply, "refunded 249.9 from 2026-01-02T03:04:05.000Z");
    assert.equal(lookups, 1);
    const seqs = (await fresh.frames("t-flow")).map((frame) => frame.seq);
    assert.deepEqual(
      seqs,
      seqs.map((_, index) => index + 1),
    );
  });

  test("two runners resuming one paused run at once run its tail once", async () => {
    const harness = opened();
    const { store } = harness;
    let refunds = 0;
    const graph = createGraph<{ done?: boolean }>(`race-${name}`).node("pay", async (_state, ctx) => {
      await approve(ctx, { title: "Pay?" });
      await tool(ctx, "refund", {}, () => {
        refunds++;
      });
      return { done: true };
    });
    const one = createRunner({ store, graphs: [graph] });
    const two = createRunner({ store: await harness.reopen(), graphs: [graph] });
    const paused = await one.start(graph, {}, { threadId: "t-race" });
    const answers = { [paused.interrupts[0]?.id ?? ""]: true };
    const results = await Promise.allSettled([one.resume("t-race", answers), two.resume("t-race", answers)]);
    await one.idle();
    await two.idle();
    assert.ok(results.every((result) => result.status === "fulfilled"));
    assert.equal(refunds, 1);
    assert.equal((await one.get("t-race"))?.status, "completed");
  });
}
