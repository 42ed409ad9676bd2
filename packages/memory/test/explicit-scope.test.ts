/**
 * Reads across a whole tenant are asked for, never implied by a missing userId; and a body sent
 * without a JSON content type is told how to send it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createToolSet } from "@tackle/core";
import { createMemoryTools, MemoryClient, MemoryError } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-explicit-"));
let server: MemoryServer;
let office: MemoryClient;
let alice: MemoryClient;

before(async () => {
  server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { "key-office": "acme", "key-alice": { tenant: "acme", userId: "alice" } },
    port: 0,
  });
  office = new MemoryClient({ baseUrl: server.url, apiKey: "key-office", allowPrivateNetwork: true });
  alice = new MemoryClient({ baseUrl: server.url, apiKey: "key-alice", allowPrivateNetwork: true });
  await office.add({ userId: "alice", content: "Alice keeps bees on the roof." });
  await office.add({ userId: "bob", content: "Bob keeps bees in the orchard." });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const refusedFor = (pattern: RegExp) => (error: unknown) =>
  MemoryError.isInstance(error) &&
  error.code === "invalid_input" &&
  error.status === 400 &&
  pattern.test(error.message);

describe("explicit whole-tenant reads", () => {
  it("a search, knowledge search, profile, context bundle or state naming no one is refused, saying how to ask", async () => {
    const noScope = /name the scope to read \(userId, agentId, sessionId\), or send wholeTenant: true/;
    await assert.rejects(office.search({ query: "bees" }), refusedFor(noScope));
    await assert.rejects(office.searchKnowledge({ query: "bees" }), refusedFor(noScope));
    await assert.rejects(office.profile({}), refusedFor(noScope));
    await assert.rejects(office.contextBundle({ query: "bees" }), refusedFor(noScope));
    await assert.rejects(office.unifiedState({}), refusedFor(noScope));
  });

  it("wholeTenant: true reads every user of the tenant; a scope reads only its own", async () => {
    const everyone = await office.search({ wholeTenant: true, query: "bees" });
    assert.deepEqual(everyone.results.map((hit) => hit.memory.userId).sort(), ["alice", "bob"]);
    const own = await office.search({ userId: "alice", query: "bees" });
    assert.deepEqual(
      own.results.map((hit) => hit.memory.userId),
      ["alice"],
    );
    const state = await office.unifiedState({ wholeTenant: true });
    assert.equal(state.counts.memories.active, 2);
  });

  it("wholeTenant beside a scope field is refused as contradictory", async () => {
    await assert.rejects(
      office.search({ userId: "alice", wholeTenant: true, query: "bees" }),
      refusedFor(/wholeTenant reads every scope; send it without userId/),
    );
  });

  it("a key bound to one user may not ask for the whole tenant", async () => {
    await assert.rejects(
      alice.search({ wholeTenant: true, query: "bees" }),
      (error: unknown) =>
        MemoryError.isInstance(error) && error.code === "scope_forbidden" && error.status === 403,
    );
    // Its own searches still fill in its user.
    const own = await alice.search({ query: "bees" });
    assert.deepEqual(
      own.results.map((hit) => hit.memory.userId),
      ["alice"],
    );
  });

  it("a tool call with an identity from the serving layer stays in it, whatever the model asks", async () => {
    const tools = createToolSet(createMemoryTools(office));
    const bound = await tools.call(
      "memory_search",
      { wholeTenant: true, query: "bees", details: true },
      { identity: { userId: "bob" } },
    );
    assert.ok(bound.ok, JSON.stringify(bound));
    const hits = (bound.output as { results: { memory: { userId: string } }[] }).results;
    assert.deepEqual(
      hits.map((hit) => hit.memory.userId),
      ["bob"],
    );
    const unnamed = await tools.call("memory_search", { query: "bees" });
    assert.equal(unnamed.ok, false);
  });
});

describe("a body without a JSON content type", () => {
  it("answers 415 saying to send JSON, and stores nothing", async () => {
    const before = (await office.status()).counts.memories;
    const response = await fetch(`${server.url}/v1/memories`, {
      method: "POST",
      headers: { authorization: "Bearer key-office", "content-type": "text/plain" },
      body: JSON.stringify({ userId: "alice", content: "sent as text" }),
    });
    assert.equal(response.status, 415);
    const answer = (await response.json()) as { error: { code: string; message: string; data: unknown } };
    assert.equal(answer.error.code, "invalid_input");
    assert.match(
      answer.error.message,
      /Send the body as JSON, with the header `Content-Type: application\/json`/,
    );
    assert.deepEqual(answer.error.data, { expected: "application/json", received: "text/plain" });
    assert.equal((await office.status()).counts.memories, before);
  });
});
