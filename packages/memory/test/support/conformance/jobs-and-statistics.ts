/** Store conformance. Consolidation, statistics, typed input errors, fused ranking, jobs across processes. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import { type ConformanceCases, rejectsWithCode, waitForJob } from "./cases.ts";

export const jobsAndStatisticsCases: ConformanceCases = {
  "consolidation merges near-duplicates (keeping history) and decays stale memories": async ({
    serviceOver,
    service,
    tenant,
  }) => {
    const t = tenant();
    const a = await service.add(t, {
      userId: "u",
      content: "The user drives a blue Volvo station wagon",
      dedupe: false,
    });
    const b = await service.add(t, {
      userId: "u",
      content: "the user drives a blue Volvo station wagon.",
      dedupe: false,
    });
    const stale = await service.add(t, {
      userId: "u",
      content: "Once mentioned liking jazz",
      importance: 0.15,
    });
    await service.recordFeedback(t, a.memory.id, { rating: "helpful" });
    const later = serviceOver({
      now: () => new Date(Date.now() + 200 * 86_400_000),
      resumeJobs: false,
    });
    const { job } = await later.consolidate(t, { userId: "u", staleAfterDays: 90 });
    const done = await waitForJob(later, t, job.id);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    const result = done.result as Record<string, number>;
    assert.equal(result.merged, 1);
    assert.equal(result.superseded, 1);
    assert.equal(result.archived, 1, "the low-importance stale memory is archived");
    const loser = (await service.getMemory(t, b.memory.id)).memory;
    assert.equal(loser.status, "superseded");
    assert.equal(loser.supersededBy, a.memory.id);
    const keeper = (await service.chainTrace(t, a.memory.id)).derivedFrom.map((memory) => memory.id);
    assert.deepEqual(keeper, [b.memory.id]);
    assert.equal((await service.getMemory(t, stale.memory.id)).memory.status, "archived");
    assert.ok(
      (await service.memoryHistory(t, stale.memory.id)).versions.some(
        (version) => version.change === "archive",
      ),
    );
  },
  "novelty scan, traces, access statistics, jobs and status answer per tenant": async ({
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    await service.add(t, { userId: "u", content: "Carol speaks fluent Portuguese" });
    const scan = await service.noveltyScan(t, {
      userId: "u",
      candidates: ["Carol speaks fluent Portuguese", "Carol owns a sailboat"],
    });
    assert.deepEqual(
      scan.results.map((result) => result.novel),
      [false, true],
    );
    assert.equal((await service.getJob(t, scan.jobId)).job.type, "novelty_scan");
    const search = await service.search(t, { userId: "u", query: "Portuguese" });
    const trace = await service.getTrace(t, search.traceId);
    assert.equal(trace.trace.query, "Portuguese");
    assert.equal(trace.trace.results[0]?.id, search.results[0]?.memory.id);
    assert.equal((await service.listTraces(t, {})).traces.length, 1);
    await rejectsWithCode(service.getTrace(tenant(), search.traceId), "not_found", 404);
    const trends = await service.accessTrends(t, { days: 7 });
    assert.equal(trends.days.length, 7);
    assert.equal(trends.days.at(-1)?.searches, 1);
    assert.equal(trends.days.at(-1)?.hits, 1);
    const summaries = await service.accessSummaries(t, {});
    assert.equal(summaries.top[0]?.content, "Carol speaks fluent Portuguese");
    assert.equal(summaries.totals.searches, 1);
    const status = await service.status(t);
    assert.equal(status.store, store.kind);
    assert.equal(status.counts.memories, 1);
    assert.equal(status.counts.traces, 1);
    const state = await service.unifiedState(t, { userId: "u" });
    assert.equal(state.counts.memories.active, 1);
  },
  "access summaries count in the store: of 600 memories, only the top `limit` are read": async ({
    serviceOver,
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    const added = await service.addBatch(t, {
      userId: "u",
      memories: Array.from({ length: 600 }, (_, index) => ({
        content: `Note ${index} about the harbour`,
        dedupe: false,
      })),
    });
    const ids = added.results.map((result) => result.memory.id);
    const at = new Date().toISOString();
    // 450 read once; three of them twice more, and one in another scope.
    await store.recordAccess(t, {
      kind: "read",
      scope: { userId: "u" },
      memoryIds: ids.slice(0, 450),
      at,
    });
    await store.recordAccess(t, { kind: "read", scope: { userId: "u" }, memoryIds: ids.slice(0, 3), at });
    await store.recordAccess(t, { kind: "read", scope: { userId: "u" }, memoryIds: ids.slice(0, 3), at });
    await service.add(t, { userId: "other", content: "Another user's note" });
    await service.deleteMemory(t, ids[449]!, {});

    // Every memory row the store hands the service is counted.
    let rowsRead = 0;
    const counting = new Proxy(store, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== "function" || !/Memor/.test(String(key))) return value;
        return (...args: unknown[]) => {
          const answer = value.apply(target, args);
          return answer instanceof Promise
            ? answer.then((rows: unknown) => {
                if (Array.isArray(rows)) rowsRead += rows.length;
                return rows;
              })
            : answer;
        };
      },
    });
    const summaries = await serviceOver({ store: counting }).accessSummaries(t, {
      userId: "u",
      limit: 5,
    });
    assert.deepEqual(summaries.totals, { memories: 599, accessed: 449, neverAccessed: 150, searches: 0 });
    assert.deepEqual(
      summaries.top.map((entry) => entry.accessCount),
      [3, 3, 3, 1, 1],
    );
    assert.deepEqual(
      summaries.top
        .slice(0, 3)
        .map((entry) => entry.memoryId)
        .sort(),
      ids.slice(0, 3).sort(),
    );
    assert.equal(rowsRead, 5, "the service read the five it lists, not every accessed memory");
  },
  "bad input is a typed invalid_input error and stores nothing": async ({ service, tenant }) => {
    const t = tenant();
    await rejectsWithCode(service.add(t, { userId: "u", content: "   " }), "invalid_input", 400);
    await rejectsWithCode(
      service.add(t, { userId: "u\u0000", content: "fine" } as never),
      "invalid_input",
      400,
    );
    await rejectsWithCode(
      service.writeEvent(t, { role: "robot", content: "x" } as never),
      "invalid_input",
      400,
    );
    assert.equal((await service.status(t)).counts.memories, 0);
    assert.equal((await service.status(t)).counts.events, 0);
  },
  "fused ranking with the deterministic test embedder names itself and scores vectors": async ({
    serviceOver,
    tenant,
  }) => {
    const t = tenant();
    const fused = serviceOver({
      embeddingModel: createHashingTestEmbedder(),
      resumeJobs: false,
    });
    await fused.add(t, { userId: "u", content: "Dana is training for the Berlin marathon" });
    await fused.add(t, { userId: "u", content: "Dana's cat is called Miso" });
    const found = await fused.search(t, { userId: "u", query: "marathon training" });
    assert.equal(found.ranking, "fused");
    assert.match(found.results[0]?.memory.content ?? "", /marathon/);
    assert.equal(typeof found.results[0]?.components.vector, "number");
    const status = await fused.status(t);
    assert.equal(status.embeddingModel, "tackle-test:hashing-test-embedder");
  },
  "a job left queued by a stopped process runs when a service starts on the store": async ({
    serviceOver,
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    await service.add(t, { userId: "u", content: "Left-behind job fact", dedupe: false });
    await service.add(t, { userId: "u", content: "left-behind job fact.", dedupe: false });
    const id = randomUUID();
    await store.insertJob({
      id,
      tenantId: t,
      type: "consolidate",
      status: "running",
      userId: "u",
      input: {
        userId: "u",
        similarityThreshold: 0.85,
        staleAfterDays: 90,
        decayFactor: 0.5,
        archiveBelow: 0.1,
      },
      createdAt: new Date(Date.now() - 60_000).toISOString(),
      startedAt: new Date(Date.now() - 60_000).toISOString(),
    });
    const restarted = serviceOver();
    const job = await waitForJob(restarted, t, id);
    assert.equal(job.status, "succeeded");
    assert.equal((job.result as { superseded: number }).superseded, 1);
  },
  "a queued job is claimed by exactly one of two processes": async ({ store, tenant }) => {
    // The suite's shared service polls the store for any tenant's queued jobs in the background: an
    // attempt where it claimed the job first is made again with a new job.
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const t = tenant();
      const id = randomUUID();
      const at = new Date().toISOString();
      await store.insertJob({
        id,
        tenantId: t,
        type: "consolidate",
        status: "queued",
        input: {},
        createdAt: at,
      });
      const claims = await Promise.all([
        store.claimJob(t, id, at, at),
        store.claimJob(t, id, at, at),
        store.claimJob(tenant(), id, at, at),
      ]);
      const won = claims.filter(Boolean).length;
      assert.ok(won <= 1, `${won} processes claimed one job`);
      assert.equal(claims[2], false, "another tenant cannot claim it");
      if (won === 1) return;
      const job = await store.getJob(t, id);
      assert.notEqual(job?.status, "queued", "a queued job that nobody could claim");
    }
    assert.fail("a background runner claimed the job first in twenty attempts");
  },
};
