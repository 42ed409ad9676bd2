import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { MemoryClient, MemoryError } from "../index.ts";
import { parseApiKeys } from "./api-keys.ts";
import { serveMemory } from "./serve-memory.ts";

it("API keys spelled like inherited properties each open their tenant over HTTP, bound or not", async () => {
  const keys = parseApiKeys(
    "__proto__=acme, constructor=acme?userId=alice, toString=other, valueOf=x?agentId=a",
  );
  assert.deepEqual(Object.keys(keys).sort(), ["__proto__", "constructor", "toString", "valueOf"]);
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-keys-"));
  const server = await serveMemory({ store: join(directory, "memory.db"), apiKeys: keys, port: 0 });
  const client = (apiKey: string) =>
    new MemoryClient({ baseUrl: server.url, apiKey, allowPrivateNetwork: true });
  try {
    const { memory } = await client("__proto__").add({
      userId: "bob",
      content: "Bob flies to Oslo on Monday",
    });
    assert.equal(memory.userId, "bob");
    const bound = await client("constructor").add({ content: "Alice flies to Rome on Tuesday" });
    assert.equal(bound.memory.userId, "alice", "the key acts as the user it is bound to");
    await assert.rejects(client("constructor").search({ userId: "bob", query: "Oslo" }), (error: unknown) => {
      assert.ok(MemoryError.isInstance(error));
      assert.equal(error.status, 403);
      return true;
    });
    const found = await client("__proto__").search({ wholeTenant: true, query: "flies" });
    assert.equal(found.results.length, 2, "both keys wrote to the tenant acme");
    const other = await client("toString").search({ wholeTenant: true, query: "flies" });
    assert.equal(other.results.length, 0, "toString's tenant is its own");
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
});

it("a key bound by an inherited property name is refused as an unknown binding, not misread", () => {
  assert.throws(() => parseApiKeys("k=t?constructor=x"), /bound to userId and agentId, not "constructor"/);
  assert.throws(
    () => parseApiKeys("k=t?userId=a&__proto__=x"),
    /bound to userId and agentId, not "__proto__"/,
  );
  assert.throws(() => parseApiKeys("k=t?toString=x"), /bound to userId and agentId, not "toString"/);
});
