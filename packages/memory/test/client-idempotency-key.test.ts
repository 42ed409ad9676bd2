/** A write's Idempotency-Key a header cannot carry: the client's typed error, as the service's, nothing sent. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { MemoryClient, MemoryError } from "@tackle/memory";
import { serveMemory } from "@tackle/memory/server";

it("an Idempotency-Key with a line break or beyond ASCII is refused as invalid_input, like one with a space", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-idempotency-key-"));
  const server = await serveMemory({ store: join(directory, "memory.db"), apiKeys: { k: "t" }, port: 0 });
  const client = new MemoryClient({ baseUrl: server.url, apiKey: "k", allowPrivateNetwork: true });
  try {
    // "a b" reaches the service, which refuses it; the others a header cannot carry at all.
    for (const idempotencyKey of ["a b", "a\r\nx-tenant: other", "ключ", "x".repeat(201), ""]) {
      await assert.rejects(
        client.add({ userId: "u", content: "I live in Porto" }, { idempotencyKey }),
        (error: unknown) => {
          assert.ok(MemoryError.isInstance(error), `${JSON.stringify(idempotencyKey)}: ${String(error)}`);
          assert.equal(error.code, "invalid_input");
          assert.equal(error.status, 400);
          assert.match(error.message, /Idempotency-Key must be 1 to 200 visible ASCII characters/);
          return true;
        },
      );
    }
    const listed = await client.listMemories({ userId: "u" });
    assert.equal(listed.memories.length, 0, "nothing was stored");
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
