/** Store conformance. Search: candidates, query text as words only, BM25, listing, neighbouring turns. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { MemoryError } from "@tackle/memory";
import type { ConformanceCases } from "./cases.ts";

export const searchCases: ConformanceCases = {
  "candidate memories: each query of a batch answers the scope's memories holding its words": async ({
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    for (const content of ["I live in Oslo", "I live in Bergen by the sea", "I drink green tea"]) {
      await service.add(t, { userId: "u", content, kind: "fact" });
    }
    await service.add(t, { userId: "v", content: "I live in Oslo", kind: "fact" });
    const [oslo, tea, both, none] = await store.candidateMemories(
      t,
      { userId: "u" },
      [
        { terms: ["live", "oslo"], every: true },
        { terms: ["tea"], every: false },
        { terms: ["oslo", "tea"], every: false },
        { terms: ["&|!"], every: false },
      ],
      { limit: 10, kinds: ["fact"] },
    );
    assert.deepEqual(
      oslo?.map((memory) => memory.content),
      ["I live in Oslo"],
    );
    assert.deepEqual(
      tea?.map((memory) => [memory.content, memory.userId]),
      [["I drink green tea", "u"]],
    );
    assert.deepEqual(both?.map((memory) => memory.content).sort(), ["I drink green tea", "I live in Oslo"]);
    assert.deepEqual(none, []);
  },
  "search text is only words: query syntax in it is never run and never widens the scope": async ({
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    const other = tenant();
    const mine = await service.add(t, { userId: "u", content: "The zebra crossing near the school" });
    await service.add(t, { userId: "someone-else", content: "A zebra at the zoo" });
    await service.add(other, { userId: "u", content: "Another tenant's zebra crossing" });
    const hostile = [
      'zebra" OR "school',
      "zebra OR scope : *",
      "zebra*",
      "NEAR(zebra crossing)",
      "content: zebra",
      "^zebra",
      "{scope content}: zebra",
      "zebra & !school | (crossing",
      "zebra:* <-> crossing",
      "'); DROP TABLE memory_memories; -- zebra",
      '"""*:()',
    ];
    for (const query of hostile) {
      const found = await service.search(t, { userId: "u", query });
      for (const result of found.results) {
        // The only memory of this tenant and user; anything else is a widened scope.
        assert.equal(result.memory.id, mine.memory.id, `query ${query} stays in its tenant and scope`);
      }
      if (/zebra/.test(query)) {
        assert.deepEqual(
          found.results.map((result) => result.memory.id),
          [mine.memory.id],
          `query ${query} finds the memory by its words`,
        );
      }
    }
    // The store itself escapes: terms that are not plain words reach neither FTS5 nor tsquery as syntax.
    const direct = await store.searchMemories(t, { userId: "u" }, ['zebra" OR "zoo', "*", "school:*", "!"], {
      limit: 10,
    });
    assert.deepEqual(
      direct.map((hit) => hit.memory.id),
      [mine.memory.id],
    );
    assert.deepEqual(await store.searchMemories(t, { userId: "u" }, ["*", '"', "()"], { limit: 10 }), []);
    assert.equal((await service.getMemory(t, mine.memory.id)).memory.content, mine.memory.content);
  },
  "BM25: a rare query word outweighs a word most memories share": async ({ service, tenant }) => {
    const t = tenant();
    for (const friend of ["Ana", "Ben", "Cho", "Dev", "Eli", "Fay", "Gus", "Hal"]) {
      await service.add(t, { userId: "u", content: `Coffee with ${friend}` });
    }
    const rare = await service.add(t, {
      userId: "u",
      content: "We are planning a long coffee tasting trip to Zanzibar with the whole family next spring",
    });
    const found = await service.search(t, { userId: "u", query: "coffee Zanzibar" });
    assert.equal(found.results[0]?.memory.id, rare.memory.id);
  },
  "a question finds a memory that words the same idea with another inflection of the word": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const allergic = await service.add(t, { userId: "u", content: "I have a penicillin allergy" });
    const teacher = await service.add(t, { userId: "u", content: "Lena teaches my cello lessons" });
    await service.add(t, { userId: "u", content: "The weather was rainy all week" });
    const allergy = await service.search(t, { userId: "u", query: "What allergies does the user have?" });
    assert.deepEqual(
      allergy.results.map((result) => result.memory.id),
      [allergic.memory.id],
    );
    const teaches = await service.search(t, { userId: "u", query: "Who is teaching the user?" });
    assert.deepEqual(
      teaches.results.map((result) => result.memory.id),
      [teacher.memory.id],
    );
  },
  "listing pages a scope in write order; a write between pages shifts nothing; a foreign cursor is refused":
    async ({ service, tenant }) => {
      const t = tenant();
      const ids: string[] = [];
      for (let index = 0; index < 7; index += 1) {
        ids.push(
          (await service.add(t, { userId: "u", kind: "episode", content: `Turn ${index}` })).memory.id,
        );
      }
      await service.add(t, { userId: "v", kind: "episode", content: "Another user's turn" });
      const first = await service.listMemories(t, { userId: "u", limit: 3 });
      await service.add(t, { userId: "u", kind: "episode", content: "Written between two pages" });
      const second = await service.listMemories(t, { userId: "u", limit: 3, cursor: first.nextCursor });
      const third = await service.listMemories(t, { userId: "u", limit: 3, cursor: second.nextCursor });
      assert.deepEqual(
        [...first.memories, ...second.memories, ...third.memories].map((memory) => memory.id),
        [...ids].reverse(),
      );
      assert.equal(third.nextCursor, undefined);
      await assert.rejects(
        service.listMemories(t, { userId: "v", cursor: first.nextCursor }),
        (error: unknown) => MemoryError.isInstance(error) && error.code === "invalid_input",
      );
    },
  "numbers and codes in a question match exactly, never as prefixes": async ({ service, tenant }) => {
    const t = tenant();
    const shipped = await service.add(t, { userId: "u", content: "Parcel 123456789 shipped" });
    await service.add(t, { userId: "u", content: "Parcel 123450000 is late" });
    const found = await service.search(t, { userId: "u", query: "where is 123456789?" });
    assert.deepEqual(
      found.results.map((result) => result.memory.id),
      [shipped.memory.id],
    );
  },
  "a possessive's 's' is not a query word": async ({ service, tenant }) => {
    const t = tenant();
    const brother = await service.add(t, { userId: "u", content: "My brother is a nurse" });
    await service.add(t, { userId: "u", content: "Marco's car is red" });
    const found = await service.search(t, { userId: "u", query: "the user's brother" });
    assert.deepEqual(
      found.results.map((result) => result.memory.id),
      [brother.memory.id],
    );
  },
  "neighbouring turns: the nearest active turns of the same scope, however many rows lie between": async ({
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    const add = async (userId: string, content: string) =>
      (await service.add(t, { userId, content, dedupe: false })).memory.id;
    const first = await add("maya", "Turn one about the garden");
    // Another scope's rows written in between (more than any fixed window of rows).
    await service.addBatch(t, {
      userId: "other",
      memories: Array.from({ length: 450 }, (_, index) => ({ content: `Other scope row ${index}` })),
    });
    const second = await add("maya", "Turn two about the beagle");
    const third = await add("maya", "Turn three, a deleted one");
    const fourth = await add("maya", "Turn four about the name");
    await service.deleteMemory(t, third, {});
    const found = await store.neighbourMemories(t, [second, first], 2);
    assert.deepEqual(
      found.get(second)?.map(({ memory, offset }) => [memory.id, offset]),
      [
        [first, -1],
        [fourth, 1],
      ],
      "the deleted turn is skipped, the other scope's rows are not neighbours",
    );
    assert.deepEqual(
      found.get(first)?.map(({ memory, offset }) => [memory.id, offset]),
      [
        [second, 1],
        [fourth, 2],
      ],
    );
    assert.equal(
      (await store.neighbourMemories(`tenant-${randomUUID()}`, [second], 2)).get(second),
      undefined,
    );
  },
  "memoryChanges answers the scope's rows changed since a stamp, in write order, any status; a purge counts as removed":
    async ({ store, service, tenant }) => {
      if (store.memoryChanges === undefined) return;
      const t = tenant();
      const changes = (scope: { userId: string; sessionId?: string }, since?: number, limit = 50) =>
        store.memoryChanges!(t, scope, { limit, ...(since === undefined ? {} : { since }) });
      assert.deepEqual(await changes({ userId: "lena" }), { stamp: 0, removed: 0, rows: [] }, "a new tenant");
      const add = async (userId: string, content: string, sessionId?: string) =>
        (await service.add(t, { userId, kind: "episode", content, ...(sessionId ? { sessionId } : {}) }))
          .memory.id;
      const first = await add("lena", "Lena: the first turn", "s1");
      const second = await add("lena", "Lena: the second turn");
      const whole = await changes({ userId: "lena" });
      assert.deepEqual(
        whole.rows.map((row) => row.memory.id),
        [second, first],
        "without since: the active memories, the latest written first",
      );
      assert.ok(whole.rows[0]!.seq > whole.rows[1]!.seq, "with their places in write order");
      assert.ok(whole.stamp > 0);
      assert.deepEqual((await changes({ userId: "lena" }, whole.stamp)).rows, [], "nothing changed since");
      assert.equal((await changes({ userId: "lena" }, undefined, 1)).rows.length, 1, "up to the limit");

      await add("omar", "Omar: another user's turn");
      const other = await changes({ userId: "lena" }, whole.stamp);
      assert.deepEqual(other.rows, [], "another scope's write is not the scope's change");
      assert.ok(other.stamp > whole.stamp, "but moves the tenant's stamp");

      const third = await add("lena", "Lena: the third turn", "s1");
      await service.updateMemory(t, first, { content: "Lena: the first turn, edited" });
      await service.deleteMemory(t, second, {});
      const since = await changes({ userId: "lena" }, other.stamp);
      assert.deepEqual(
        since.rows.map((row) => [row.memory.id, row.memory.status, row.memory.content]),
        [
          [third, "active", "Lena: the third turn"],
          [second, "deleted", "Lena: the second turn"],
          [first, "active", "Lena: the first turn, edited"],
        ],
        "an add, an edit and a delete (a status change), each as it now stands, the latest written first",
      );
      assert.deepEqual(
        (await changes({ userId: "lena", sessionId: "s1" }, other.stamp)).rows
          .map((row) => row.memory.id)
          .sort(),
        [first, third].sort(),
        "the scope's own rows only",
      );
      assert.equal(since.removed, 0, "no row has left the tenant");

      await service.purge(t, { userId: "lena", sessionId: "s1" });
      const purged = await changes({ userId: "lena" }, since.stamp);
      assert.ok(purged.removed > since.stamp, "a purge's deleted rows are a removal");
      assert.deepEqual(purged.rows, [], "deleted rows are not answered");
    },
};
