import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("addBatch stores many memories of one scope, each deduplicated like add, in order", async () => {
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }) });
  const held = await service.add("t", { userId: "u", content: "I live in Lisbon" });
  const { results } = await service.addBatch("t", {
    userId: "u",
    memories: [
      { content: "I play the cello on Sundays" },
      { content: "I live in Lisbon" },
      { content: "I play the cello on Sundays!" },
      { content: "My sister is called Lena", kind: "fact" },
    ],
  });
  assert.deepEqual(
    results.map((result) => result.created),
    [true, false, false, true],
  );
  assert.equal(results[1]!.duplicateOf, held.memory.id);
  assert.equal(results[2]!.duplicateOf, results[0]!.memory.id, "a repeat inside the batch is found too");
  const found = await service.search("t", { userId: "u", query: "cello" });
  assert.equal(found.results.length, 1);
  await assert.rejects(
    service.addBatch("t", { userId: "u", memories: [{ content: "ok" }, { content: "" }] }),
    /invalid/i,
    "a bad item refuses the whole batch",
  );
  assert.equal((await service.search("t", { userId: "u", query: "ok" })).results.length, 0);
  await service.close();
});
