/**
 * A request whose database connection is lost mid-write (here PostgreSQL ends the service's sessions,
 * as a restart, a failover or an administrator does; a server out of connections fails the same way)
 * is answered 503 `unavailable`, retryable, with `Retry-After`, not 500 `internal`: its transaction
 * rolled back, and a retry under the same Idempotency-Key stores the write once (ADR 0569).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

/** Holds the embedding of a text with "hold" in it (inside the write's transaction) until `release`. */
function heldEmbedder() {
  const inner = createHashingTestEmbedder();
  let reached: () => void = () => undefined;
  let release: () => void = () => undefined;
  const held = { reached: new Promise<void>((resolve) => (reached = resolve)) };
  const gate = new Promise<void>((resolve) => (release = resolve));
  const model: EmbeddingModelV4 = {
    ...inner,
    async doEmbed(options) {
      if (options.values.some((value) => String(value).includes("hold"))) {
        reached();
        await gate;
      }
      return inner.doEmbed(options);
    },
  };
  return { model, reached: held.reached, release: () => release() };
}

async function post(url: string, key: string, body: unknown) {
  const response = await fetch(`${url}/v1/memories`, {
    method: "POST",
    headers: { authorization: "Bearer key-a", "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  });
  return { response, body: (await response.json()) as { error?: { code: string; retryable: boolean } } };
}

describe("a write whose database connection is lost", () => {
  let database: TestDatabase;
  let server: MemoryServer;
  const embedder = heldEmbedder();
  before(async () => {
    database = await createTestDatabase("tackle_memory_transient");
    server = await serveMemory({
      store: database.url,
      apiKeys: { "key-a": "tenant-a" },
      port: 0,
      embeddingModel: embedder.model,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    });
  });
  after(async () => {
    await server?.close();
    await database?.drop();
  });

  it("answers 503 unavailable, retryable; the retry under its key stores it once", async () => {
    const body = { userId: "u1", kind: "episode", content: "Ada noted the hold" };
    const first = post(server.url, "key-1", body);
    await embedder.reached;
    // The write holds its connection in its transaction: PostgreSQL ends every session of the service.
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      const ended = await admin.query(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      assert.ok(ended.rows.length > 0, "the service's sessions were ended");
    } finally {
      await admin.end();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    embedder.release();
    const lost = await first;
    assert.equal(lost.response.status, 503, JSON.stringify(lost.body));
    assert.equal(lost.body.error?.code, "unavailable");
    assert.equal(lost.body.error?.retryable, true);
    assert.equal(lost.response.headers.get("retry-after"), "1");

    const retried = await post(server.url, "key-1", body);
    assert.equal(retried.response.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.response.headers.get("idempotent-replayed"), null);
    const again = await post(server.url, "key-1", body);
    assert.equal(again.response.headers.get("idempotent-replayed"), "true");
    const listed = await fetch(`${server.url}/v1/memories?userId=u1`, {
      headers: { authorization: "Bearer key-a" },
    });
    const { memories } = (await listed.json()) as { memories: { content: string }[] };
    assert.deepEqual(
      memories.map((memory) => memory.content),
      [body.content],
    );
  });
});
