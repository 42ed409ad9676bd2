/**
 * Writes through `MemoryClient` happen once, over real HTTP on both stores: an answer lost after the
 * service stored the write (a relay resets the connection as the answer starts) is retried under the
 * call's idempotency key and answered, not stored again; keys are per tenant; a key reused for another
 * request is refused; concurrent requests under one key run the write once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { MemoryClient, MemoryError } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import { createTestDatabase, startTcpRelay, type TcpRelay, type TestDatabase } from "@tackle/test-support";

/** The test embedder, slowed so that an add takes long enough for concurrent requests to overlap. */
function slowEmbedder(delayMs: number): EmbeddingModelV4 {
  const inner = createHashingTestEmbedder();
  return {
    ...inner,
    async doEmbed(options) {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return inner.doEmbed(options);
    },
  };
}

const apiKeys = { "key-a": "tenant-a", "key-b": "tenant-b" };

// The service of the block being run (one block per store, one after the other), set by its hooks.
let directory: string | undefined;
let database: TestDatabase | undefined;
let server: MemoryServer;
let relay: TcpRelay;
let viaRelay: MemoryClient;
let direct: MemoryClient;

const episodes = async (client: MemoryClient, userId: string) =>
  (await client.unifiedState({ userId })).counts.memories.active;

for (const kind of ["sqlite", "postgres"] as const) {
  describe(`exactly-once writes over HTTP (${kind})`, () => {
    before(async () => {
      directory = undefined;
      database = undefined;
      let store: string;
      if (kind === "sqlite") {
        directory = mkdtempSync(join(tmpdir(), "tackle-memory-once-"));
        store = join(directory, "memory.db");
      } else {
        database = await createTestDatabase("tackle_memory_once");
        store = database.url;
      }
      server = await serveMemory({ store, apiKeys, port: 0, embeddingModel: slowEmbedder(150) });
      relay = await startTcpRelay(server.url);
      viaRelay = new MemoryClient({
        baseUrl: relay.url,
        apiKey: "key-a",
        allowPrivateNetwork: true,
        retryBaseMs: 5,
      });
      direct = new MemoryClient({ baseUrl: server.url, apiKey: "key-a", allowPrivateNetwork: true });
    });
    after(async () => {
      await relay?.close();
      await server?.close();
      await database?.drop();
      if (directory) rmSync(directory, { recursive: true, force: true });
    });

    lostAnswerTests();
    keyTests(kind);
    concurrencyTests(kind);
  });
}

/** Writes whose answer the relay loses are retried and done once. */
function lostAnswerTests(): void {
  it("an add whose answer is lost after the service stored it is retried, stored once, and reported as a replay", async () => {
    const posts = () => relay.requests.filter((request) => request === "POST /v1/memories").length;
    const resetsBefore = relay.resets;
    const postsBefore = posts();
    relay.loseNextAnswer();
    // An episode is never deduplicated by its words (ADR 0355): only the key keeps it single.
    const answer = await viaRelay.add({
      userId: "lost-add",
      kind: "episode",
      content: "Ada: Haha, totally.",
    });
    assert.equal(relay.resets, resetsBefore + 1, "the first answer was lost");
    assert.equal(posts(), postsBefore + 2, "the client sent the add again");
    assert.equal(await episodes(direct, "lost-add"), 1, "the retry stored nothing more");
    assert.equal(answer.created, true);
    assert.equal(answer.replayed, true, "the caller is told the answer is the first one's");
    assert.equal((await direct.getMemory(answer.memory.id)).memory.content, "Ada: Haha, totally.");
    // A new call is a new write: the same words said again are a second turn.
    const again = await viaRelay.add({
      userId: "lost-add",
      kind: "episode",
      content: "Ada: Haha, totally.",
    });
    assert.equal(again.replayed, undefined);
    assert.notEqual(again.memory.id, answer.memory.id);
    assert.equal(await episodes(direct, "lost-add"), 2);
  });

  it("other writes lost the same way are done once: an event without a custom id, a feedback, an import job", async () => {
    relay.loseNextAnswer();
    const event = await viaRelay.writeEvent({
      sessionId: "lost-event",
      role: "assistant",
      content: "Noted.",
    });
    assert.equal(event.replayed, true);
    assert.equal((await direct.recallConversation({ sessionId: "lost-event" })).events.length, 1);

    const { memory } = await direct.add({ userId: "lost-feedback", content: "Ada prefers window seats." });
    relay.loseNextAnswer();
    const rated = await viaRelay.recordFeedback(memory.id, { rating: "helpful" });
    assert.equal(rated.replayed, true);
    assert.deepEqual((await direct.getMemory(memory.id)).memory.feedback, { helpful: 1, unhelpful: 0 });

    const jobsBefore = (await direct.listJobs({ type: "import" })).jobs.length;
    relay.loseNextAnswer();
    const submitted = await viaRelay.importConversations({
      format: "openai",
      conversations: [{ messages: [{ role: "user", content: "I am based in Kyoto." }] }],
    });
    assert.equal(submitted.replayed, true);
    await direct.waitForJob(submitted.job.id);
    assert.equal((await direct.listJobs({ type: "import" })).jobs.length, jobsBefore + 1);
  });
}

/** A key belongs to its tenant and to one request. */
function keyTests(kind: string): void {
  it("a key is its tenant's own: another tenant's request under the same key is its own write", async () => {
    const send = (apiKey: string, content: string) =>
      fetch(`${server.url}/v1/memories`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${apiKey}`,
          "content-type": "application/json",
          "idempotency-key": "shared-key",
        },
        body: JSON.stringify({ userId: "same-user", kind: "episode", content }),
      });
    const first = await send("key-a", "Tenant A's launch date is May 5");
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const aliceMemory = ((await first.json()) as { memory: { id: string } }).memory;
    // B's request under A's key, with another body: not refused (A's use of the key is invisible to B).
    const theirs = await send("key-b", "Tenant B's budget is 40k");
    assert.equal(theirs.status, 200);
    assert.equal(theirs.headers.get("idempotent-replayed"), null);
    const bobMemory = ((await theirs.json()) as { memory: { id: string; content: string } }).memory;
    assert.equal(bobMemory.content, "Tenant B's budget is 40k");
    // B sending A's very request under the key never gets A's answer: for B the key holds B's write.
    const copy = await send("key-b", "Tenant A's launch date is May 5");
    assert.equal(copy.status, 422);
    const copyText = await copy.text();
    assert.ok(copyText.includes("idempotency_key_reused"));
    assert.ok(!copyText.includes(aliceMemory.id), "nothing of A's answer reaches B");
    // A's repeat answers A's own first answer.
    const repeat = await send("key-a", "Tenant A's launch date is May 5");
    assert.equal(repeat.headers.get("idempotent-replayed"), "true");
    assert.equal(((await repeat.json()) as { memory: { id: string } }).memory.id, aliceMemory.id);
    const bob = new MemoryClient({ baseUrl: server.url, apiKey: "key-b", allowPrivateNetwork: true });
    await assert.rejects(bob.getMemory(aliceMemory.id), (error: MemoryError) => error.status === 404);
    assert.equal(await episodes(bob, "same-user"), 1);
    assert.equal(await episodes(direct, "same-user"), 1);
  });

  it("a key reused for another request is refused with idempotency_key_reused, and nothing more is stored", async () => {
    const key = `reuse-${kind}`;
    const first = await direct.add(
      { userId: "reuse", kind: "episode", content: "first words" },
      { idempotencyKey: key },
    );
    const repeat = await direct.add(
      { userId: "reuse", kind: "episode", content: "first words" },
      { idempotencyKey: key },
    );
    assert.equal(repeat.replayed, true);
    assert.equal(repeat.memory.id, first.memory.id);
    await assert.rejects(
      direct.add({ userId: "reuse", kind: "episode", content: "other words" }, { idempotencyKey: key }),
      (error: unknown) =>
        MemoryError.isInstance(error) &&
        error.code === "idempotency_key_reused" &&
        error.status === 422 &&
        !error.retryable,
    );
    // Another operation under the key is another request too.
    await assert.rejects(
      direct.recordFeedback(first.memory.id, { rating: "helpful" }, { idempotencyKey: key }),
      (error: MemoryError) => error.code === "idempotency_key_reused",
    );
    assert.equal(await episodes(direct, "reuse"), 1);
    assert.deepEqual((await direct.getMemory(first.memory.id)).memory.feedback, {
      helpful: 0,
      unhelpful: 0,
    });
  });
}

/** Concurrent requests under one key, a fail-over to another service, and reads. */
function concurrencyTests(kind: string): void {
  it("concurrent requests under one key run the write once; the others wait and answer its answer", async () => {
    const responses = await Promise.all(
      Array.from({ length: 6 }, () =>
        fetch(`${server.url}/v1/memories`, {
          method: "POST",
          headers: {
            authorization: "Bearer key-a",
            "content-type": "application/json",
            "idempotency-key": `concurrent-${kind}`,
          },
          body: JSON.stringify({ userId: "concurrent", kind: "episode", content: "Ada: see you then." }),
        }),
      ),
    );
    const bodies = (await Promise.all(responses.map((response) => response.json()))) as {
      memory: { id: string };
    }[];
    assert.deepEqual(
      responses.map((response) => response.status),
      [200, 200, 200, 200, 200, 200],
    );
    assert.equal(new Set(bodies.map((body) => body.memory.id)).size, 1);
    assert.equal(
      responses.filter((response) => response.headers.get("idempotent-replayed") === "true").length,
      5,
    );
    assert.equal(await episodes(direct, "concurrent"), 1);
  });

  if (kind === "postgres") {
    it("a retry that fails over to another service on the same database is answered there, not stored again", async () => {
      const other = await serveMemory({ store: database!.url, apiKeys, port: 0 });
      try {
        const failover = new MemoryClient({
          baseUrl: [relay.url, other.url],
          apiKey: "key-a",
          allowPrivateNetwork: true,
          retryBaseMs: 5,
        });
        relay.loseNextAnswer();
        const answer = await failover.add({
          userId: "failover",
          kind: "episode",
          content: "Ada: on my way.",
        });
        assert.equal(failover.baseUrl, other.url, "the retry went to the other service");
        assert.equal(answer.replayed, true);
        assert.equal(await episodes(direct, "failover"), 1);
      } finally {
        await other.close();
      }
    });
  }

  it("reads carry no key and are never replayed", async () => {
    const response = await fetch(`${server.url}/v1/memories/search`, {
      method: "POST",
      headers: {
        authorization: "Bearer key-a",
        "content-type": "application/json",
        "idempotency-key": "read-key",
      },
      body: JSON.stringify({ userId: "u", query: "window seats" }),
    });
    assert.equal(response.status, 200);
    await response.body?.cancel();
    const again = await fetch(`${server.url}/v1/memories/search`, {
      method: "POST",
      headers: {
        authorization: "Bearer key-a",
        "content-type": "application/json",
        "idempotency-key": "read-key",
      },
      body: JSON.stringify({ userId: "u", query: "other words" }),
    });
    assert.equal(again.status, 200, "a search ignores the key: it stores nothing to repeat");
    assert.equal(again.headers.get("idempotent-replayed"), null);
    await again.body?.cancel();
  });
}
