import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("an import job rerun extracts the memories of an event its killed run stored but never extracted, once", async () => {
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store });
  const at = new Date().toISOString();
  // What a process killed between storing the event and extracting from it leaves behind.
  await store.appendEvent({
    id: "event-1",
    tenantId: "t",
    customId: "import:turn-0",
    role: "user",
    content: "I live in Lisbon",
    userId: "u",
    metadata: { importJobId: "job-1", turn: 0 },
    source: "import",
    importJobId: "job-1",
    occurredAt: at,
    createdAt: at,
  });
  const request = {
    userId: "u",
    role: "user" as const,
    content: "I live in Lisbon",
    customId: "import:turn-0",
    metadata: { importJobId: "job-1", turn: 0 },
    infer: true,
  };
  const rerun = await service.writeEvent("t", request);
  assert.equal(rerun.created, false, "the event is not stored twice");
  assert.equal(rerun.memories.length, 1, "the rerun extracts what the killed run did not");
  const again = await service.writeEvent("t", request);
  assert.equal(again.memories.length, 0, "a second rerun adds nothing");
  const listed = await service.search("t", { userId: "u", query: "Lisbon" });
  assert.deepEqual(
    listed.results.map((result) => result.memory.kind).sort(),
    ["episode", "fact"],
    "the turn kept once as an episode and its fact mined once, not twice",
  );

  // A plain retry of an API write (no import job) still extracts only once, on creation.
  const first = await service.writeEvent("t", {
    userId: "u",
    role: "user",
    content: "My sister is called Lena",
    customId: "api-1",
    infer: true,
  });
  assert.equal(first.memories.length, 1);
  await service.deleteMemory("t", first.memories[0]!.id, { reason: "the user asked to forget it" });
  const retried = await service.writeEvent("t", {
    userId: "u",
    role: "user",
    content: "My sister is called Lena",
    customId: "api-1",
    infer: true,
  });
  assert.equal(retried.memories.length, 0, "a retried write does not bring back a forgotten memory");
  await service.close();
});
