import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("add refuses the same fact reworded (short and long texts) and stores a short text one word apart", async () => {
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }), resumeJobs: false });
  const short = await service.add("t", { userId: "u", content: "Maya plays cello in Lisbon" });
  const reordered = await service.add("t", { userId: "u", content: "in Lisbon, Maya plays cello" });
  assert.equal(reordered.created, false);
  assert.equal(reordered.duplicateOf, short.memory.id);
  const oneApart = await service.add("t", { userId: "u", content: "Maya plays cello in Porto" });
  assert.equal(oneApart.created, true);
  const long = await service.add("t", {
    userId: "u",
    content: "Maya booked window seats flying Lisbon Porto Madrid Paris Berlin Rome every spring",
  });
  const longer = await service.add("t", {
    userId: "u",
    content: "Maya booked window seats flying Lisbon Porto Madrid Paris Berlin Rome every spring again",
  });
  assert.equal(longer.created, false, "one word more in a dozen is the same fact");
  assert.equal(longer.duplicateOf, long.memory.id);
  const other = await service.add("u2", { userId: "u", content: "Maya plays cello in Lisbon" });
  assert.equal(other.created, true, "another tenant's fact is not a duplicate");
  await service.close();
});
