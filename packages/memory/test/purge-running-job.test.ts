/**
 * An import job running while its user is purged writes nothing after the purge (ADR 0561): its turns
 * come from input stored before the purge, and each batch it wrote after it brought the purged text
 * back. The purge here falls between two of the job's batches (inside the embedding call that plans
 * the second), on a SQLite file and on PostgreSQL.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { createMemoryService, MemoryError } from "@tackle/memory";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import {
  orphansOf,
  type PurgeSubject,
  postgresPurgeSubject,
  purgeSubjectsOfSuite,
  sqlitePurgeSubject,
  usageFromRows,
} from "./support/purge-scans.ts";

const tenant = "jobs";
const prefix = "zq7k";
/** Three batches of 100 turns (the import's default batch). */
const turns = 300;

/** The test embedder, which runs `hook` (once) at its `call`-th call before it answers. */
function hookedEmbedder(call: number, hook: () => Promise<void>): EmbeddingModelV4 {
  const embedder = createHashingTestEmbedder();
  let calls = 0;
  return {
    ...embedder,
    async doEmbed(options) {
      calls += 1;
      if (calls === call) await hook();
      return embedder.doEmbed(options);
    },
  };
}

async function purgeMidImport(subject: PurgeSubject, round: number) {
  const store = await subject.open(round);
  let purged: Promise<{ purged: { events: number } }> | undefined;
  // Set once the service exists. The first call embeds another user's memory, the second the job's
  // first batch; the third plans its second batch, the first committed.
  let purge = async () => ({ purged: { events: 0 } });
  const service = createMemoryService({
    store,
    embeddingModel: hookedEmbedder(3, async () => {
      purged = purge();
      assert.equal((await purged).purged.events, 100, "the purge deleted the job's first batch");
    }),
  });
  purge = () => service.purge(tenant, { userId: "u" });
  let jobId = "";
  try {
    const { memory: kept } = await service.add(tenant, { userId: "v", content: "My locker code is 4411" });
    const { job } = await service.importConversations(tenant, {
      userId: "u",
      format: "openai",
      infer: true,
      conversations: [
        {
          id: "long",
          messages: Array.from({ length: turns }, (_, index) => ({
            role: index % 2 === 0 ? "user" : "assistant",
            content:
              index % 2 === 0
                ? `I prefer blend ${prefix}${index}q for the morning tea.`
                : `Noted, blend ${prefix}${index}q.`,
          })),
        },
      ],
    });
    jobId = job.id;
    for (let waited = 0; purged === undefined; waited += 1) {
      assert.ok(waited < 6_000, "the job never reached its second batch");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal((await purged).purged.events, 100, "the purge deleted the job's first batch");
    // The worker goes on with the job; closing the service waits for it to stop.
    await service.close();
    assert.deepEqual([...(await subject.scan(prefix))], [], "no marker of the purged user is stored");
    if (subject.fileBytes) assert.deepEqual([...subject.fileBytes(prefix)], [], "nor in the file's bytes");
    assert.deepEqual(await orphansOf(subject, tenant), []);
    // What a client polling the job reads: not found, as every other record of the purged user.
    const again = await subject.open(round);
    const reopened = createMemoryService({ store: again, resumeJobs: false });
    try {
      await assert.rejects(
        reopened.getJob(tenant, jobId),
        (error) => MemoryError.isInstance(error) && error.code === "not_found",
      );
      const { memories } = await reopened.listMemories(tenant, { userId: "v" });
      assert.deepEqual(
        memories.map((memory) => memory.id),
        [kept.id],
        "another user's memory is kept",
      );
      const usage = await again.usage(tenant);
      assert.deepEqual(usage, await usageFromRows(subject, tenant), "usage equals a recount");
    } finally {
      await reopened.close();
    }
  } finally {
    await service.close().catch(() => undefined);
  }
}

const { directory, subjects } = purgeSubjectsOfSuite("tackle-memory-purge-job-");

describe("an import job running while its user is purged", () => {
  it("a SQLite file: the job writes nothing after the purge and is gone", async () => {
    const subject = sqlitePurgeSubject(directory);
    subjects.push(subject);
    await purgeMidImport(subject, 1);
  });
  it("PostgreSQL: the job writes nothing after the purge and is gone", async () => {
    const subject = await postgresPurgeSubject("tackle_memory_purge_job");
    subjects.push(subject);
    await purgeMidImport(subject, 2);
  });
});
