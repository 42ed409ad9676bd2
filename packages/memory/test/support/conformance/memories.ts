/** Store conformance. Memories: adds, the novelty check, scope, versions, feedback. */
import assert from "node:assert/strict";
import { type ConformanceCases, rejectsWithCode } from "./cases.ts";

export const memoriesCases: ConformanceCases = {
  "keeps every episode (a repeated conversation turn) with its own date; a repeated fact is still refused":
    async ({ service, tenant }) => {
      const t = tenant();
      const first = await service.add(t, { userId: "ada", kind: "episode", content: "Ada: Haha, totally." });
      const again = await service.add(t, { userId: "ada", kind: "episode", content: "Ada: Haha, totally." });
      assert.equal(again.created, true, "a turn said twice is two turns");
      assert.notEqual(again.memory.id, first.memory.id);
      const batch = await service.addBatch(t, {
        userId: "ada",
        memories: [
          { kind: "episode", content: "Ada: Haha, totally." },
          { kind: "episode", content: "Ada: Haha, totally." },
          { content: "Ada lives in Lisbon." },
          { content: "Ada lives in Lisbon." },
        ],
      });
      assert.deepEqual(
        batch.results.map((result) => result.created),
        [true, true, true, false],
      );
      const asked = await service.add(t, {
        userId: "ada",
        kind: "episode",
        content: "Ada: Haha, totally.",
        dedupe: true,
      });
      assert.equal(asked.created, false, "dedupe: true still refuses a repeated episode");
      const found = await service.search(t, { userId: "ada", query: "haha totally", limit: 10 });
      assert.equal(found.results.filter((result) => result.memory.kind === "episode").length, 4);
    },
  "adds, gets and finds a memory; the same fact twice is stored once": async ({ service, tenant }) => {
    const t = tenant();
    const first = await service.add(t, { userId: "ada", content: "Ada is allergic to peanuts." });
    assert.equal(first.created, true);
    const again = await service.add(t, { userId: "ada", content: "ada is allergic to peanuts" });
    assert.equal(again.created, false);
    assert.equal(again.duplicateOf, first.memory.id);
    const near = await service.add(t, { userId: "ada", content: "Ada is allergic to peanuts!!" });
    assert.equal(near.created, false);
    const allowed = await service.add(t, {
      userId: "ada",
      content: "Ada is allergic to peanuts.",
      dedupe: false,
    });
    assert.equal(allowed.created, true);
    const { memory } = await service.getMemory(t, first.memory.id);
    assert.equal(memory.content, "Ada is allergic to peanuts.");
    const found = await service.search(t, { userId: "ada", query: "peanut allergy" });
    assert.equal(found.ranking, "bm25");
    assert.ok(found.results.some((result) => result.memory.id === first.memory.id));
  },
  "concurrent adds of one fact store it once": async ({ service, tenant }) => {
    const t = tenant();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        service.add(t, { userId: "u", content: "The office wifi password is hunter2" }),
      ),
    );
    assert.equal(answers.filter((answer) => answer.created).length, 1);
    assert.equal(new Set(answers.map((answer) => answer.memory.id)).size, 1);
  },
  "scope is the AND of every identity field given, never widened": async ({ service, tenant }) => {
    const t = tenant();
    await service.add(t, { userId: "u1", agentId: "a1", content: "zebra fact one" });
    await service.add(t, { userId: "u1", agentId: "a2", content: "zebra fact two" });
    await service.add(t, { userId: "u2", agentId: "a1", content: "zebra fact three" });
    const narrow = await service.search(t, { userId: "u1", agentId: "a1", query: "zebra" });
    assert.deepEqual(
      narrow.results.map((result) => result.memory.content),
      ["zebra fact one"],
    );
    const user = await service.search(t, { userId: "u1", query: "zebra" });
    assert.deepEqual(user.results.map((result) => result.memory.content).sort(), [
      "zebra fact one",
      "zebra fact two",
    ]);
    for (const result of user.results) assert.equal(result.memory.userId, "u1");
    const other = await service.search(tenant(), { wholeTenant: true, query: "zebra" });
    assert.equal(other.results.length, 0, "another tenant sees nothing");
  },
  "operations by id inside a scope answer not_found for a memory outside it": async ({ service, tenant }) => {
    const t = tenant();
    const { memory } = await service.add(t, { userId: "owner", agentId: "a1", content: "Scoped by id" });
    const outside = { userId: "intruder" };
    await rejectsWithCode(service.getMemory(t, memory.id, outside), "not_found", 404);
    await rejectsWithCode(
      service.updateMemory(t, memory.id, { content: "taken over" }, outside),
      "not_found",
    );
    await rejectsWithCode(service.deleteMemory(t, memory.id, { reason: "gone" }, outside), "not_found");
    await rejectsWithCode(
      service.recordFeedback(t, memory.id, { rating: "unhelpful" }, outside),
      "not_found",
    );
    await rejectsWithCode(
      service.recordProcedureOutcome(t, memory.id, { success: false }, outside),
      "not_found",
    );
    await rejectsWithCode(
      service.memoryHistory(t, memory.id, { userId: "owner", agentId: "a2" }),
      "not_found",
    );
    await rejectsWithCode(service.chainTrace(t, memory.id, outside), "not_found");
    const inside = await service.getMemory(t, memory.id, { userId: "owner" });
    assert.equal(inside.memory.version, 1, "nothing changed");
    assert.equal(inside.memory.content, "Scoped by id");
  },
  "updates keep every version; expectedVersion guards; delete is soft and kept in history": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const { memory } = await service.add(t, { userId: "u", content: "Bob lives in Paris" });
    const updated = await service.updateMemory(t, memory.id, {
      content: "Bob lives in Lyon",
      reason: "moved",
    });
    assert.equal(updated.memory.version, 2);
    await rejectsWithCode(
      service.updateMemory(t, memory.id, { content: "Bob lives in Nice", expectedVersion: 1 }),
      "conflict",
      409,
    );
    const deleted = await service.deleteMemory(t, memory.id, { reason: "user asked" });
    assert.equal(deleted.memory.status, "deleted");
    const search = await service.search(t, { userId: "u", query: "Bob lives" });
    assert.equal(search.results.length, 0, "a deleted memory is not retrieved");
    const history = await service.memoryHistory(t, memory.id);
    assert.deepEqual(
      history.versions.map((version) => [version.version, version.change, version.content]),
      [
        [1, "create", "Bob lives in Paris"],
        [2, "update", "Bob lives in Lyon"],
        [3, "delete", "Bob lives in Lyon"],
      ],
    );
    assert.equal(history.versions[1]?.reason, "moved");
    await rejectsWithCode(service.getMemory(tenant(), memory.id), "not_found", 404);
    await rejectsWithCode(service.updateMemory(t, memory.id, { content: "x y z" }), "conflict", 409);
  },
  "concurrent feedback and outcomes all count (optimistic concurrency retries)": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const { memory } = await service.add(t, {
      userId: "u",
      kind: "procedure",
      content: "Deploy with make release",
    });
    await Promise.all([
      ...Array.from({ length: 5 }, () => service.recordFeedback(t, memory.id, { rating: "helpful" })),
      ...Array.from({ length: 3 }, (_, index) =>
        service.recordProcedureOutcome(t, memory.id, { success: index > 0 }),
      ),
    ]);
    const { memory: after } = await service.getMemory(t, memory.id);
    assert.deepEqual(after.feedback, { helpful: 5, unhelpful: 0 });
    assert.deepEqual(after.outcomes, { successes: 2, failures: 1 });
    assert.equal(after.version, 9);
  },
  "feedback moves ranking: a helpful memory outranks an equal one": async ({ service, tenant }) => {
    const t = tenant();
    const first = await service.add(t, { userId: "u", content: "Tea recipe alpha uses green leaves" });
    const second = await service.add(t, { userId: "u", content: "Tea recipe beta uses green leaves" });
    await service.recordFeedback(t, second.memory.id, { rating: "helpful" });
    await service.recordFeedback(t, first.memory.id, { rating: "unhelpful" });
    const found = await service.search(t, { userId: "u", query: "tea recipe green leaves" });
    assert.equal(found.results[0]?.memory.id, second.memory.id);
  },
};
