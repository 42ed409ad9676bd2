/**
 * `GET /v1/memories` over HTTP on a SQLite file: pages in write order that hold still while others
 * write, confined to the caller's tenant and identity, and a cursor that is not one is a typed 400.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { MemoryClient, MemoryError } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-list-"));
let server: MemoryServer;
let office: MemoryClient;
let alice: MemoryClient;
let rival: MemoryClient;

before(async () => {
  server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: {
      "key-office": "acme",
      "key-alice": { tenant: "acme", userId: "alice" },
      "key-rival": "globex",
    },
    port: 0,
  });
  const client = (apiKey: string) =>
    new MemoryClient({ baseUrl: server.url, apiKey, allowPrivateNetwork: true });
  office = client("key-office");
  alice = client("key-alice");
  rival = client("key-rival");
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const invalid = (pattern: RegExp) => (error: unknown) =>
  MemoryError.isInstance(error) &&
  error.code === "invalid_input" &&
  error.status === 400 &&
  pattern.test(error.message);
const forbidden = (error: unknown) => MemoryError.isInstance(error) && error.status === 403;

describe("GET /v1/memories", () => {
  it("pages through a scope newest first; memories added while paging never enter or shift a page", async () => {
    const written: string[] = [];
    for (let index = 0; index < 45; index += 1) {
      const { memory } = await office.add({
        userId: "pager",
        kind: "fact",
        content: `Fact number ${index} of the pager.`,
      });
      written.push(memory.id);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await office.listMemories({ userId: "pager", limit: 20, ...(cursor ? { cursor } : {}) });
      seen.push(...page.memories.map((memory) => memory.id));
      assert.ok(page.memories.every((memory) => memory.userId === "pager"));
      cursor = page.nextCursor;
      pages += 1;
      // Another writer adds to the same scope between two pages.
      await Promise.all(
        [0, 1, 2].map((extra) =>
          office.add({
            userId: "pager",
            kind: "episode",
            content: `Added during page ${pages}, number ${extra}.`,
          }),
        ),
      );
    } while (cursor !== undefined && pages < 10);
    assert.equal(pages, 3, "20 + 20 + 5");
    assert.deepEqual(seen, [...written].reverse(), "every memory once, the latest written first");
    const fresh = await office.listMemories({ userId: "pager", limit: 9 });
    assert.ok(
      fresh.memories.every((memory) => memory.content.startsWith("Added during page")),
      JSON.stringify(fresh.memories.map((memory) => memory.content)),
    );
  });

  it("filters by kind and status", async () => {
    await office.add({ userId: "kinds", kind: "preference", content: "Prefers tea over coffee." });
    const fact = await office.add({ userId: "kinds", kind: "fact", content: "Lives in Porto." });
    await office.deleteMemory(fact.memory.id, {}, { scope: { userId: "kinds" } });
    const preferences = await office.listMemories({ userId: "kinds", kind: "preference" });
    assert.deepEqual(
      preferences.memories.map((memory) => memory.content),
      ["Prefers tea over coffee."],
    );
    const active = await office.listMemories({ userId: "kinds" });
    assert.equal(active.memories.length, 1, "a deleted memory is not listed as active");
    const deleted = await office.listMemories({ userId: "kinds", status: "deleted" });
    assert.deepEqual(
      deleted.memories.map((memory) => memory.id),
      [fact.memory.id],
    );
    assert.equal(deleted.nextCursor, undefined);
  });

  it("lists only the caller's tenant and identity; the whole tenant only when asked, never with a bound key", async () => {
    await office.add({ userId: "alice", content: "Alice keeps bees on the roof." });
    await office.add({ userId: "bob", content: "Bob keeps bees in the orchard." });
    await rival.add({ userId: "alice", content: "Another tenant's Alice." });
    const own = await alice.listMemories({});
    assert.deepEqual(
      own.memories.map((memory) => memory.content),
      ["Alice keeps bees on the roof."],
    );
    await assert.rejects(alice.listMemories({ userId: "bob" }), forbidden);
    await assert.rejects(alice.listMemories({ wholeTenant: true }), forbidden);
    const theirs = await rival.listMemories({ userId: "alice" });
    assert.deepEqual(
      theirs.memories.map((memory) => memory.content),
      ["Another tenant's Alice."],
    );
    await assert.rejects(office.listMemories({}), invalid(/name the scope to read/));
    const everyone = await office.listMemories({ wholeTenant: true, limit: 200 });
    const users = new Set(everyone.memories.map((memory) => memory.userId));
    assert.ok(users.has("alice") && users.has("bob") && users.has("pager"));
    assert.ok(everyone.memories.every((memory) => memory.content !== "Another tenant's Alice."));
  });

  it("a cursor that is not one of this listing is a typed 400, never another scope's page", async () => {
    const first = await office.listMemories({ userId: "pager", limit: 5 });
    assert.ok(first.nextCursor);
    await assert.rejects(office.listMemories({ userId: "bob", cursor: first.nextCursor }), invalid(/cursor/));
    await assert.rejects(
      rival.listMemories({ userId: "pager", cursor: first.nextCursor }),
      invalid(/cursor/),
    );
    await assert.rejects(
      office.listMemories({ userId: "pager", cursor: "5b3f7d2e-0000-4000-8000-000000000000" }),
      invalid(/cursor/),
    );
    await assert.rejects(office.listMemories({ userId: "pager", cursor: "not a cursor" }), invalid(/./));
    const response = await fetch(`${server.url}/v1/memories?userId=pager&cursor=nope`, {
      headers: { authorization: "Bearer key-office" },
    });
    assert.equal(response.status, 400);
    assert.equal(((await response.json()) as { error: { code: string } }).error.code, "invalid_input");
  });
});
