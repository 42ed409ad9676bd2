/**
 * A novelty scan's record keeps no memory's text (ADR 0564), on a SQLite file and on PostgreSQL: it
 * names each candidate's nearest memory by id, so a purge of that memory's narrower scope leaves the
 * scan's record (of the wider scope) and no copy of the purged text; the answer to the caller still
 * quotes the text. Records stored before, which quoted it, lose the quote in the migration.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMemoryService, type MemoryService } from "@tackle/memory";
import {
  type PurgeSubject,
  postgresPurgeSubject,
  purgeSubjectsOfSuite,
  sqlitePurgeSubject,
} from "./support/purge-scans.ts";

const tenant = "scans";

async function withService<T>(
  subject: PurgeSubject,
  round: number,
  body: (service: MemoryService) => Promise<T>,
) {
  const service = createMemoryService({ store: await subject.open(round), resumeJobs: false });
  try {
    return await body(service);
  } finally {
    await service.close();
  }
}

/** A memory of `{ userId: "u", sessionId: "s1" }` carrying `marker`, and a scan of all of `u`'s. */
async function scanNearMemory(service: MemoryService, marker: string) {
  const { memory } = await service.add(tenant, {
    userId: "u",
    sessionId: "s1",
    content: `The garden gate code is ${marker}`,
  });
  const scan = await service.noveltyScan(tenant, { userId: "u", candidates: ["garden gate code"] });
  assert.equal(scan.results[0]?.nearest?.memoryId, memory.id);
  assert.match(scan.results[0]?.nearest?.content ?? "", new RegExp(marker), "the answer quotes the memory");
  return { memory, scan };
}

async function checkRecord(subject: PurgeSubject) {
  const marker = "zq5k1q";
  await withService(subject, 1, async (service) => {
    const { memory, scan } = await scanNearMemory(service, marker);
    const { job } = await service.getJob(tenant, scan.jobId);
    const [answered] = scan.results;
    assert.deepEqual(job.result, {
      results: [
        {
          content: "garden gate code",
          novel: answered!.novel,
          nearest: { memoryId: memory.id, similarity: answered!.nearest!.similarity },
        },
      ],
    });
    await service.purge(tenant, { userId: "u", sessionId: "s1" });
    assert.equal(
      (await service.getJob(tenant, scan.jobId)).job.status,
      "succeeded",
      "the scan's record is kept",
    );
  });
  assert.deepEqual([...(await subject.scan("zq5k"))], [], "no copy of the purged memory's text");
  if (subject.fileBytes) assert.deepEqual([...subject.fileBytes("zq5k")], [], "nor in the file's bytes");
}

async function checkMigration(subject: PurgeSubject) {
  const marker = "zq6k1q";
  const quoted = await withService(subject, 2, async (service) => {
    const { memory, scan } = await scanNearMemory(service, marker);
    // The record as scans stored it before: the nearest memory's text quoted.
    const result = JSON.stringify({
      results: [
        {
          content: "garden gate code",
          novel: true,
          nearest: { memoryId: memory.id, content: memory.content, similarity: 0.75 },
        },
      ],
    });
    await subject.rows("UPDATE memory_jobs SET result = ? WHERE id = ?", [result, scan.jobId]);
    return scan.jobId;
  });
  if (subject.name === "PostgreSQL") {
    await subject.rows("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 17", []);
  } else {
    await subject.rows("PRAGMA user_version = 15", []);
  }
  await withService(subject, 2, async (service) => {
    const { job } = await service.getJob(tenant, quoted);
    assert.deepEqual(Object.keys((job.result as { results: { nearest: object }[] }).results[0]!.nearest), [
      "memoryId",
      "similarity",
    ]);
    await service.purge(tenant, { userId: "u", sessionId: "s1" });
  });
  assert.deepEqual([...(await subject.scan("zq6k"))], [], "no copy of the purged memory's text");
}

const { directory, subjects } = purgeSubjectsOfSuite("tackle-memory-scan-record-");

for (const [name, make] of [
  ["a SQLite file", async (_: string) => sqlitePurgeSubject(directory)],
  ["PostgreSQL", (suffix: string) => postgresPurgeSubject(`tackle_memory_scan_record_${suffix}`)],
] as const) {
  describe(`a novelty scan's record: ${name}`, () => {
    it("names the nearest memory by id: a purge of its scope leaves no copy of its text", async () => {
      const subject = await make("record");
      subjects.push(subject);
      await checkRecord(subject);
    });
    it("the migration drops the text records stored before quoted", async () => {
      const subject = await make("migration");
      subjects.push(subject);
      await checkMigration(subject);
    });
  });
}
