import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("the context bundle states each fact once: not in the profile, the memories and the turns all at once", async () => {
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }) });
  const scope = { userId: "alice" };
  const written = await service.writeEvent("t", {
    ...scope,
    sessionId: "s1",
    role: "user",
    content: "I prefer green tea with jasmine.",
  });
  assert.ok(written.memories.length >= 1, "a preference was mined from the turn");
  await service.add("t", { ...scope, content: "I work as a pharmacist in Denver", kind: "fact" });
  const bundle = await service.contextBundle("t", { ...scope, query: "which tea do I like" });
  const everything = JSON.stringify([
    bundle.profile.summary,
    bundle.memories.map((memory) => memory.content),
    bundle.recentEvents.map((event) => event.content),
  ]);
  assert.equal(everything.match(/jasmine/g)?.length, 1, everything);
  assert.equal(everything.match(/pharmacist/g)?.length, 1, everything);
  await service.close();
});
