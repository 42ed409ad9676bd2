/**
 * An access recorded for a memory a purge deletes leaves no access row behind (ADR 0559): a search or
 * a read answered before the purge records its accesses after it, or while it runs.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createMemoryService } from "@tackle/memory";
import pg from "pg";
import { writeAccess } from "../src/store/postgres/postgres-sql.ts";
import {
  orphansOf,
  type PurgeSubject,
  postgresPurgeSubject,
  purgeSubjectsOfSuite,
  sqlitePurgeSubject,
} from "./support/purge-scans.ts";

/**
 * A search or read answered before a purge records its accesses after it: the hit of a memory the
 * purge deleted must not leave an access row behind (on PostgreSQL the property races it for real).
 */
async function lateAccess(subject: PurgeSubject) {
  const store = await subject.open(1_000);
  const service = createMemoryService({ store, resumeJobs: false });
  try {
    const tenant = "late";
    const { memory } = await service.add(tenant, { userId: "u0", content: "My locker code is 4411" });
    await service.purge(tenant, { userId: "u0" });
    const at = new Date().toISOString();
    const scope = { userId: "u0" };
    await store.insertTrace(
      {
        id: randomUUID(),
        tenantId: tenant,
        ...scope,
        operation: "search",
        query: "locker",
        ranking: "bm25",
        results: [],
        durationMs: 1,
        createdAt: at,
      },
      [
        { kind: "search", scope, memoryIds: [], at },
        { kind: "hit", scope, memoryIds: [memory.id], at },
      ],
    );
    await store.recordAccess(tenant, { kind: "read", scope, memoryIds: [memory.id], at });
    assert.deepEqual(await orphansOf(subject, tenant), []);
  } finally {
    await service.close();
  }
}

/**
 * PostgreSQL: a read's access is written, uncommitted, when the purge starts. The purge waits for it
 * and then deletes it; deleting the access rows first and the memories after left the row, committed
 * in between, naming a memory no longer stored.
 */
async function accessDuringPurge(subject: PurgeSubject) {
  const store = await subject.open(0);
  const service = createMemoryService({ store, resumeJobs: false });
  const writer = new pg.Client({ connectionString: subject.url });
  await writer.connect();
  try {
    const tenant = "during";
    const scope = { userId: "u0" };
    const { memory } = await service.add(tenant, { ...scope, content: "My bike lock is 7781" });
    const at = new Date().toISOString();
    await writer.query("BEGIN");
    // A read's access, its transaction left open: its memory counted and locked, its row written.
    await writeAccess(writer as unknown as pg.PoolClient, tenant, {
      kind: "read",
      scope,
      memoryIds: [memory.id],
      at,
    });
    const purging = service.purge(tenant, scope);
    // The purge reaches a row the open statement holds, and waits for it.
    for (let waited = 0; ; waited += 1) {
      const [row] = await subject.rows(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        [],
      );
      if (Number(row!.n) > 0) break;
      assert.ok(waited < 500, "the purge never waited for the access being recorded");
      await sleep(10);
    }
    await writer.query("COMMIT");
    assert.equal((await purging).purged.memories, 1);
    assert.deepEqual(await orphansOf(subject, tenant), []);
  } finally {
    await writer.end();
    await service.close();
  }
}

/**
 * PostgreSQL: searches counting the same hits at once, each share-locking the memories for its access
 * rows' check and then locking them for the count, in one statement: every one answers.
 */
async function searchesTogether(subject: PurgeSubject) {
  const store = await subject.open(0);
  const service = createMemoryService({ store, resumeJobs: false });
  try {
    const tenant = "together";
    const scope = { userId: "u0" };
    for (const word of ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]) {
      await service.add(tenant, { ...scope, content: `The ${word} lantern is on the shelf`, dedupe: false });
    }
    const searches = await Promise.allSettled(
      Array.from({ length: 24 }, () => service.search(tenant, { ...scope, query: "lantern shelf" })),
    );
    const failed = searches.filter((search) => search.status === "rejected");
    assert.deepEqual(
      failed.map((search) => String((search as PromiseRejectedResult).reason)),
      [],
      "every search answered",
    );
    const hits = searches.map((search) => (search as PromiseFulfilledResult<{ results: unknown[] }>).value);
    assert.ok(hits.every((search) => search.results.length === 6));
  } finally {
    await service.close();
  }
}

const { directory, subjects } = purgeSubjectsOfSuite("tackle-memory-purge-late-");

describe("an access recorded for a purged memory", () => {
  it("a SQLite file: recorded after the purge, it leaves no row", async () => {
    const subject = sqlitePurgeSubject(directory);
    subjects.push(subject);
    await lateAccess(subject);
  });
  it("PostgreSQL: recorded after the purge, it leaves no row", async () => {
    const subject = await postgresPurgeSubject("tackle_memory_purge_late");
    subjects.push(subject);
    await lateAccess(subject);
  });
  it("PostgreSQL: recorded while the purge starts, it is purged with its memory", async () => {
    const subject = await postgresPurgeSubject("tackle_memory_purge_during");
    subjects.push(subject);
    await accessDuringPurge(subject);
  });
  it("PostgreSQL: searches counting the same hits at once all answer", async () => {
    const subject = await postgresPurgeSubject("tackle_memory_purge_hits");
    subjects.push(subject);
    await searchesTogether(subject);
  });
});
