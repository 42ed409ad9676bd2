/**
 * A consolidation job running while part of its scope is purged (ADR 0564): the purge falls between
 * the job's read of the memories and its changes to them, on a SQLite file and on PostgreSQL. The
 * job skips what was purged and consolidates the rest; the purged memories stay gone, and other
 * users' jobs are untouched. A consolidation whose own scope is purged under it is gone with it and
 * writes nothing after the purge.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { MemoryService } from "@tackle/memory";
import { jobEndOf } from "./support/job-end.ts";
import { serviceWithListingHook } from "./support/purge-jobs.ts";
import {
  orphansOf,
  type PurgeSubject,
  postgresPurgeSubject,
  purgeSubjectsOfSuite,
  sqlitePurgeSubject,
  usageFromRows,
} from "./support/purge-scans.ts";

/** Near-duplicates of one fact in each of two sessions, and one other fact, all stale for the job. */
async function seed(service: MemoryService, tenant: string, prefix: string, userId: string) {
  const ids: Record<string, string[]> = {};
  for (const sessionId of ["s0", "s1"]) {
    ids[sessionId] = [];
    for (const content of [
      `Ada drinks green tea ${prefix}${sessionId === "s0" ? 1 : 2}q every morning`,
      `Ada drinks green tea ${prefix}${sessionId === "s0" ? 3 : 4}q every single morning`,
      `The locker code is ${prefix}${sessionId === "s0" ? 5 : 6}q`,
    ]) {
      const { memory } = await service.add(tenant, { userId, sessionId, content, dedupe: false });
      ids[sessionId]!.push(memory.id);
    }
  }
  return ids;
}

async function purgeUnderConsolidation(subject: PurgeSubject, round: number) {
  const tenant = "consolidating";
  const prefix = "zq9k";
  const store = await subject.open(round);
  const { service, errors, onListing } = serviceWithListingHook(store, "u");
  try {
    const other = await service.consolidate(tenant, { userId: "v" });
    assert.equal((await jobEndOf(service, tenant, other.job.id)).status, "succeeded");
    const ids = await seed(service, tenant, prefix, "u");
    let purged: { purged: { memories: number } } | undefined;
    onListing(async () => {
      purged = await service.purge(tenant, { userId: "u", sessionId: "s1" });
    });
    const { job } = await service.consolidate(tenant, {
      userId: "u",
      similarityThreshold: 0.6,
      staleAfterDays: 0,
    });
    const end = await jobEndOf(service, tenant, job.id);
    assert.equal(purged?.purged.memories, 3, "the purge ran while the job held its listing");
    assert.equal(end.status, "succeeded", `the job: ${JSON.stringify(end.error)}`);
    // What it reports is what it did: the session left, merged and decayed; the purged one skipped.
    const result = end.result as { scanned: number; merged: number; superseded: number; decayed: number };
    assert.deepEqual(
      {
        scanned: result.scanned,
        merged: result.merged,
        superseded: result.superseded,
        decayed: result.decayed,
      },
      { scanned: 6, merged: 1, superseded: 1, decayed: 2 },
    );
    const left = await service.listMemories(tenant, { userId: "u", status: "superseded", limit: 10 });
    assert.equal(left.memories.length, 1);
    assert.ok(ids.s0!.slice(0, 2).includes(left.memories[0]!.id), "one of the kept session's pair merged");
    assert.deepEqual(
      [...(await subject.scan(prefix))].sort(),
      ["zq9k1q", "zq9k3q", "zq9k5q"],
      "only the kept session's text is stored",
    );
    assert.deepEqual(await orphansOf(subject, tenant), []);
    assert.deepEqual(await store.usage(tenant), await usageFromRows(subject, tenant));
    assert.equal((await service.getJob(tenant, other.job.id)).job.status, "succeeded", "another user's job");
    assert.deepEqual(errors, [], "errors logged");
  } finally {
    await service.close();
  }
}

/** A consolidation whose own scope is purged under it: gone, nothing written after the purge. */
async function purgeOwnScope(subject: PurgeSubject, round: number) {
  const tenant = "consolidating-own";
  const prefix = "zq8k";
  const store = await subject.open(round);
  const { service, errors, onListing } = serviceWithListingHook(store, "u");
  try {
    await seed(service, tenant, prefix, "u");
    onListing(() => service.purge(tenant, { userId: "u" }));
    const { job } = await service.consolidate(tenant, { userId: "u", sessionId: "s0", staleAfterDays: 0 });
    assert.equal((await jobEndOf(service, tenant, job.id)).status, "purged");
    await service.close();
    assert.deepEqual([...(await subject.scan(prefix))], [], "no text of the purged user");
    if (subject.fileBytes) assert.deepEqual([...subject.fileBytes(prefix)], [], "nor in the file's bytes");
    const [rows] = await subject.rows("SELECT count(*) AS n FROM memory_history WHERE tenant_id = ?", [
      tenant,
    ]);
    assert.equal(Number(rows!.n), 0, "no version written after the purge");
    assert.equal((await usageFromRows(subject, tenant)).memories, 0);
    assert.deepEqual(await orphansOf(subject, tenant), []);
    assert.deepEqual(errors, [], "errors logged");
  } finally {
    await service.close().catch(() => undefined);
  }
}

const { directory, subjects } = purgeSubjectsOfSuite("tackle-memory-purge-consolidation-");

for (const [name, make] of [
  ["a SQLite file", async () => sqlitePurgeSubject(directory)],
  ["PostgreSQL", () => postgresPurgeSubject("tackle_memory_purge_consolidation")],
] as const) {
  describe(`a consolidation job running while its scope is purged: ${name}`, () => {
    let subject: PurgeSubject | undefined;
    const open = async () => {
      subject ??= await make();
      if (!subjects.includes(subject)) subjects.push(subject);
      return subject;
    };
    it("part of its scope purged: it skips the purged memories and consolidates the rest", async () => {
      await purgeUnderConsolidation(await open(), 1);
    });
    it("its own scope purged: the job is gone and writes nothing after the purge", async () => {
      await purgeOwnScope(await open(), 2);
    });
  });
}
