/**
 * `MemoryClient.importExport` sends each part of a cut export once the job before it has finished, so
 * a conversation cut into parts joins its session in order even where several service processes share
 * one PostgreSQL store and any of them may run a job (ADR 0549). Before, it started every part at once:
 * on a shared store two processes ran two parts together and their turns interleaved in the session.
 * The embedding model here is slowed, so a job takes longer than sending the next part.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { MemoryClient, MemoryError, splitChatExport } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-import-waits-"));
const servers: MemoryServer[] = [];
const databases: TestDatabase[] = [];
after(async () => {
  for (const server of servers) await server.close();
  for (const database of databases) await database.drop();
  rmSync(directory, { recursive: true, force: true });
});

/** The test embedder, each call 300 ms late: an import's batch takes longer than a part's upload. */
function slowEmbedder(): EmbeddingModelV4 {
  const embedder = createHashingTestEmbedder();
  return {
    ...embedder,
    async doEmbed(options) {
      await sleep(300);
      return embedder.doEmbed(options);
    },
  };
}

const turns = 400;

/** One ChatGPT conversation of `turns` turns of ~30 KB (dashes: nothing to embed or index), cut in 3. */
function longExport(): string {
  const mapping: Record<string, unknown> = { root: { parent: null, message: null } };
  for (let index = 0; index < turns; index += 1) {
    mapping[`m${index}`] = {
      parent: index === 0 ? "root" : `m${index - 1}`,
      message: {
        author: { role: index % 2 === 0 ? "user" : "assistant" },
        content: { content_type: "text", parts: [`Turn ${index}: ${"-".repeat(30_000)}`] },
        create_time: 1714550400 + index,
      },
    };
  }
  return JSON.stringify([{ id: "long", title: "Long", mapping, current_node: `m${turns - 1}` }]);
}

async function sessionOrder(client: MemoryClient): Promise<string[]> {
  const order: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.recallConversation({
      userId: "ada",
      sessionId: "import:long",
      order: "asc",
      limit: 200,
      ...(cursor === undefined ? {} : { cursor }),
    });
    order.push(...page.events.map((event) => event.content.slice(0, event.content.indexOf(":"))));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return order;
}

async function importsInOrder(stores: string[]) {
  for (const store of stores) {
    servers.push(
      await serveMemory({ store, apiKeys: { key: "t" }, port: 0, embeddingModel: slowEmbedder() }),
    );
  }
  const client = new MemoryClient({
    baseUrl: servers.at(-stores.length)!.url,
    apiKey: "key",
    allowPrivateNetwork: true,
    timeoutMs: 60_000,
  });
  const exported = longExport();
  const parts = splitChatExport("chatgpt-export", exported);
  assert.equal(parts.length, 3, "the conversation is cut in three parts");
  const { jobs } = await client.importExport({
    userId: "ada",
    format: "chatgpt-export",
    export: exported,
    infer: false,
  });
  assert.equal(jobs.length, 3);
  assert.deepEqual(
    jobs.map((job) => job.status),
    ["succeeded", "succeeded", "succeeded"],
    "each part finished when the call answered",
  );
  assert.deepEqual(
    await sessionOrder(client),
    Array.from({ length: turns }, (_, index) => `Turn ${index}`),
    "the cut conversation's turns are in its session in order",
  );
  // On one process the jobs ran in order anyway; what makes it hold on any store: each part was sent
  // only once the one before it had finished.
  for (const [index, job] of jobs.entries()) {
    if (index > 0) {
      assert.ok(
        job.createdAt >= jobs[index - 1]!.finishedAt!,
        `part ${index + 1} was sent at ${job.createdAt}; part ${index} finished at ${jobs[index - 1]!.finishedAt}`,
      );
    }
  }
  return client;
}

describe("importExport waits for each part's job before sending the next", () => {
  it("on a SQLite file: each part is sent after the one before finished, turns in order", async () => {
    await importsInOrder([join(directory, "memory.db")]);
  });

  it("on PostgreSQL shared by two service processes: the cut conversation keeps its order", async () => {
    const database = await createTestDatabase("tackle_memory_import_waits");
    databases.push(database);
    await importsInOrder([database.url, database.url]);
  });

  it("a failed part stops the import with the job's code; wait: false starts every part at once", async () => {
    const server = await serveMemory({
      store: join(directory, "quota.db"),
      apiKeys: { key: "t" },
      port: 0,
      // Room for the first part's turns (and their episode memories), not for the second's.
      quotas: { maxEventBytes: 5_000_000 },
    });
    servers.push(server);
    const client = new MemoryClient({ baseUrl: server.url, apiKey: "key", allowPrivateNetwork: true });
    const request = { userId: "ada", format: "chatgpt-export" as const, export: longExport(), infer: false };
    await assert.rejects(client.importExport(request), (error: unknown) => {
      assert.ok(MemoryError.isInstance(error), String(error));
      assert.equal(error.code, "quota_exceeded");
      assert.equal(error.status, 409);
      assert.match(error.message, /^Import part 2 of 3 \(job [\w-]+\) failed: /);
      const data = error.data as { jobs: { status: string }[]; parts: number };
      assert.deepEqual(
        data.jobs.map((job) => job.status),
        ["succeeded", "failed"],
      );
      assert.equal(data.parts, 3);
      return true;
    });
    const { jobs } = await client.listJobs({ type: "import" });
    assert.equal(jobs.length, 2, "the third part was never sent");
    const started = await client.importExport(request, { wait: false });
    assert.deepEqual(
      started.jobs.map((job) => job.status),
      ["queued", "queued", "queued"],
      "without waiting, each part's job is answered queued",
    );
  });
});
