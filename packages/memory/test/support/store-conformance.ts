/**
 * The conformance suite every store passes: each behaviour the service promises, run through the
 * service on the store under test. Each test works in its own fresh tenant.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { createMemoryService, MemoryError, type MemoryService, type MemoryStore } from "@tackle/memory";
import { createHashingTestEmbedder } from "@tackle/memory/test";
import { underLoadMs } from "@tackle/test-support";

export interface ConformanceTarget {
  /** Opens the store; called again after `close` to prove data survives a reopen. */
  open(): Promise<MemoryStore>;
  /** Removes whatever the suite created (a database, a file). */
  destroy(): Promise<void>;
}

async function rejectsWithCode(promise: Promise<unknown>, code: string, status?: number) {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(MemoryError.isInstance(error), `expected a MemoryError, got ${String(error)}`);
    assert.equal(error.code, code);
    if (status !== undefined) assert.equal(error.status, status);
    return true;
  });
}

export function storeConformance(label: string, target: ConformanceTarget): void {
  describe(`store conformance: ${label}`, () => {
    let store: MemoryStore;
    let service: MemoryService;
    const tenant = () => `tenant-${randomUUID()}`;

    before(async () => {
      store = await target.open();
      service = createMemoryService({ store });
    });
    after(async () => {
      await service.close();
      await target.destroy();
    });

    it("keeps every episode (a repeated conversation turn) with its own date; a repeated fact is still refused", async () => {
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
    });

    it("adds, gets and finds a memory; the same fact twice is stored once", async () => {
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
    });

    it("concurrent adds of one fact store it once", async () => {
      const t = tenant();
      const answers = await Promise.all(
        Array.from({ length: 8 }, () =>
          service.add(t, { userId: "u", content: "The office wifi password is hunter2" }),
        ),
      );
      assert.equal(answers.filter((answer) => answer.created).length, 1);
      assert.equal(new Set(answers.map((answer) => answer.memory.id)).size, 1);
    });

    it("scope is the AND of every identity field given, never widened", async () => {
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
    });

    it("operations by id inside a scope answer not_found for a memory outside it", async () => {
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
    });

    it("updates keep every version; expectedVersion guards; delete is soft and kept in history", async () => {
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
    });

    it("concurrent feedback and outcomes all count (optimistic concurrency retries)", async () => {
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
    });

    it("feedback moves ranking: a helpful memory outranks an equal one", async () => {
      const t = tenant();
      const first = await service.add(t, { userId: "u", content: "Tea recipe alpha uses green leaves" });
      const second = await service.add(t, { userId: "u", content: "Tea recipe beta uses green leaves" });
      await service.recordFeedback(t, second.memory.id, { rating: "helpful" });
      await service.recordFeedback(t, first.memory.id, { rating: "unhelpful" });
      const found = await service.search(t, { userId: "u", query: "tea recipe green leaves" });
      assert.equal(found.results[0]?.memory.id, second.memory.id);
    });

    it("events: one custom id written concurrently stores one event; recall pages by session", async () => {
      const t = tenant();
      const writes = await Promise.all(
        Array.from({ length: 10 }, () =>
          service.writeEvent(t, {
            userId: "u",
            sessionId: "s1",
            role: "user",
            content: "I live in Oslo.",
            customId: "turn-1",
          }),
        ),
      );
      assert.equal(writes.filter((write) => write.created).length, 1);
      assert.equal(new Set(writes.map((write) => write.event.id)).size, 1);
      assert.equal(
        writes.flatMap((write) => write.memories).length,
        1,
        "the extracted memory is stored once",
      );
      for (let index = 2; index <= 5; index += 1) {
        await service.writeEvent(t, {
          userId: "u",
          sessionId: "s1",
          role: "assistant",
          content: `reply ${index}`,
          infer: false,
        });
      }
      await service.writeEvent(t, { userId: "u", sessionId: "s2", role: "user", content: "other session" });
      const page1 = await service.recallConversation(t, { sessionId: "s1", limit: 2, order: "asc" });
      assert.deepEqual(
        page1.events.map((event) => event.content),
        ["I live in Oslo.", "reply 2"],
      );
      assert.ok(page1.nextCursor);
      const page2 = await service.recallConversation(t, {
        sessionId: "s1",
        limit: 2,
        order: "asc",
        cursor: page1.nextCursor,
      });
      const page3 = await service.recallConversation(t, {
        sessionId: "s1",
        limit: 2,
        order: "asc",
        cursor: page2.nextCursor,
      });
      assert.deepEqual(
        [...page2.events, ...page3.events].map((event) => event.content),
        ["reply 3", "reply 4", "reply 5"],
      );
      assert.equal(page3.nextCursor, undefined);
      const newest = await service.recallConversation(t, { sessionId: "s1", limit: 1 });
      assert.equal(newest.events[0]?.content, "reply 5");
      assert.equal((await service.recallConversation(tenant(), { sessionId: "s1" })).events.length, 0);
    });

    it("a batch of events is stored in order; a taken custom id answers the event holding it, in or before the batch", async () => {
      const t = tenant();
      const event = (customId: string | undefined, content: string) => ({
        id: randomUUID(),
        tenantId: t,
        ...(customId === undefined ? {} : { customId }),
        role: "user" as const,
        content,
        userId: "u",
        metadata: {},
        source: "api" as const,
        occurredAt: "2026-01-01T00:00:00.000Z",
        createdAt: "2026-01-01T00:00:00.000Z",
      });
      const first = await store.appendEvent(event("a", "first"));
      const answers = await store.appendEvents([
        event("b", "second"),
        event("a", "first again"),
        event(undefined, "third"),
        event("b", "second again"),
      ]);
      assert.deepEqual(
        answers.map((answer) => [answer.event.content, answer.created]),
        [
          ["second", true],
          ["first", false],
          ["third", true],
          ["second", false],
        ],
      );
      assert.equal(answers[1]?.event.id, first.event.id);
      const listed = await store.listEvents(t, { userId: "u" }, { order: "asc", limit: 10 });
      assert.deepEqual(
        listed.map((stored) => stored.content),
        ["first", "second", "third"],
      );
      assert.deepEqual(await store.appendEvents([]), []);
    });

    it("candidate memories: each query of a batch answers the scope's memories holding its words", async () => {
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
    });

    it("chain trace leads from an extracted memory back to its event", async () => {
      const t = tenant();
      const { event, memories } = await service.writeEvent(t, {
        userId: "u",
        sessionId: "s",
        role: "user",
        content: "My favourite colour is teal. What is yours?",
      });
      assert.equal(memories.length, 1);
      assert.equal(memories[0]?.kind, "preference");
      const chain = await service.chainTrace(t, memories[0]!.id);
      assert.deepEqual(
        chain.events.map((item) => item.id),
        [event.id],
      );
      assert.equal(chain.versions[0]?.change, "create");
    });

    it("search text is only words: query syntax in it is never run and never widens the scope", async () => {
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
      const direct = await store.searchMemories(
        t,
        { userId: "u" },
        ['zebra" OR "zoo', "*", "school:*", "!"],
        {
          limit: 10,
        },
      );
      assert.deepEqual(
        direct.map((hit) => hit.memory.id),
        [mine.memory.id],
      );
      assert.deepEqual(await store.searchMemories(t, { userId: "u" }, ["*", '"', "()"], { limit: 10 }), []);
      assert.equal((await service.getMemory(t, mine.memory.id)).memory.content, mine.memory.content);
    });

    it("BM25: a rare query word outweighs a word most memories share", async () => {
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
    });

    it("a question finds a memory that words the same idea with another inflection of the word", async () => {
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
    });

    it("listing pages a scope in write order; a write between pages shifts nothing; a foreign cursor is refused", async () => {
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
    });

    it("numbers and codes in a question match exactly, never as prefixes", async () => {
      const t = tenant();
      const shipped = await service.add(t, { userId: "u", content: "Parcel 123456789 shipped" });
      await service.add(t, { userId: "u", content: "Parcel 123450000 is late" });
      const found = await service.search(t, { userId: "u", query: "where is 123456789?" });
      assert.deepEqual(
        found.results.map((result) => result.memory.id),
        [shipped.memory.id],
      );
    });

    it("a possessive's 's' is not a query word", async () => {
      const t = tenant();
      const brother = await service.add(t, { userId: "u", content: "My brother is a nurse" });
      await service.add(t, { userId: "u", content: "Marco's car is red" });
      const found = await service.search(t, { userId: "u", query: "the user's brother" });
      assert.deepEqual(
        found.results.map((result) => result.memory.id),
        [brother.memory.id],
      );
    });

    it("neighbouring turns: the nearest active turns of the same scope, however many rows lie between", async () => {
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
    });

    it("knowledge base: chunked ingest is idempotent and searchable, only in its tenant", async () => {
      const t = tenant();
      const content = `${"Intro paragraph about the handbook. ".repeat(20)}\n\nRefunds are processed within fourteen days of the return.\n\n${"Closing words. ".repeat(30)}`;
      const first = await service.ingestDocument(t, { title: "Handbook", content, chunkSize: 300 });
      assert.equal(first.created, true);
      assert.ok(first.document.chunkCount >= 3);
      const again = await service.ingestDocument(t, { title: "Handbook", content, chunkSize: 300 });
      assert.equal(again.created, false);
      assert.equal(again.document.id, first.document.id);
      const found = await service.searchKnowledge(t, {
        wholeTenant: true,
        query: "how long do refunds take",
      });
      assert.match(found.results[0]?.content ?? "", /Refunds are processed/);
      assert.equal(found.results[0]?.title, "Handbook");
      assert.equal(
        (await service.searchKnowledge(tenant(), { wholeTenant: true, query: "refunds" })).results.length,
        0,
      );
    });

    it("self-edit: append, exact replace, clear errors with capacity, all-or-nothing batches", async () => {
      const t = tenant();
      const scope = { agentId: "agent-1", userId: "u" };
      const read = await service.selfEdit(t, { ...scope, edits: [] });
      assert.deepEqual(
        read.blocks.map((block) => [block.label, block.remaining]),
        [
          ["human", 2000],
          ["persona", 2000],
        ],
      );
      const appended = await service.selfEdit(t, {
        ...scope,
        edits: [{ op: "append", label: "human", text: "Name: Ada" }],
      });
      assert.equal(
        appended.blocks.find((block) => block.label === "human")?.remaining,
        2000 - "Name: Ada".length,
      );
      await rejectsWithCode(
        service.selfEdit(t, {
          ...scope,
          edits: [{ op: "replace", label: "human", oldText: "Name: Bob", newText: "x" }],
        }),
        "edit_no_match",
        422,
      );
      await assert.rejects(
        service.selfEdit(t, {
          ...scope,
          edits: [{ op: "append", label: "persona", text: "x".repeat(2001) }],
        }),
        (error: MemoryError) => {
          assert.equal(error.code, "capacity_exceeded");
          const data = error.data as { blocks: { label: string; remaining: number }[] };
          assert.ok(data.blocks.some((block) => block.label === "persona" && block.remaining === 2000));
          return true;
        },
      );
      await rejectsWithCode(
        service.selfEdit(t, {
          ...scope,
          edits: [
            { op: "append", label: "persona", text: "I am helpful" },
            { op: "replace", label: "human", oldText: "missing", newText: "x" },
          ],
        }),
        "edit_no_match",
      );
      const unchanged = await service.selfEdit(t, { ...scope, edits: [] });
      assert.equal(
        unchanged.blocks.find((block) => block.label === "persona")?.value,
        "",
        "the failed batch left nothing",
      );
      const replaced = await service.selfEdit(t, {
        ...scope,
        edits: [{ op: "replace", label: "human", oldText: "Ada", newText: "Ada Lovelace" }],
      });
      assert.equal(replaced.blocks.find((block) => block.label === "human")?.value, "Name: Ada Lovelace");
      await Promise.all(
        Array.from({ length: 6 }, (_, index) =>
          service.selfEdit(t, {
            ...scope,
            edits: [{ op: "append", label: "persona", text: `line ${index}` }],
          }),
        ),
      );
      const persona = (await service.selfEdit(t, { ...scope, edits: [] })).blocks.find(
        (block) => block.label === "persona",
      );
      assert.equal(persona?.value.split("\n").length, 6, "concurrent appends all land");
    });

    it("profile and context bundle stay within the token budget", async () => {
      const t = tenant();
      await service.add(t, { userId: "u", kind: "preference", content: "Prefers window seats on flights" });
      await service.add(t, { userId: "u", kind: "fact", content: "Works as a marine biologist in Bergen" });
      await service.writeEvent(t, {
        userId: "u",
        sessionId: "s",
        role: "user",
        content: "Book me a flight to Bergen",
        infer: false,
      });
      const { profile } = await service.profile(t, { userId: "u" });
      assert.deepEqual(profile.preferences, ["Prefers window seats on flights"]);
      assert.equal(profile.generatedBy, "deterministic");
      const bundle = await service.contextBundle(t, { userId: "u", query: "flight seats" });
      assert.ok(bundle.memories.some((memory) => memory.content.includes("window seats")));
      assert.equal(bundle.recentEvents.at(-1)?.content, "Book me a flight to Bergen");
      assert.ok(bundle.tokenEstimate <= bundle.tokenBudget);
      await service.writeEvent(t, {
        userId: "u",
        sessionId: "s",
        role: "assistant",
        content: "Sure. ".repeat(60),
        infer: false,
      });
      const tight = await service.contextBundle(t, { userId: "u", query: "flight seats", tokenBudget: 50 });
      assert.ok(tight.tokenEstimate <= 50);
      assert.equal(tight.truncated, true);
    });

    it("import jobs store OpenAI and Anthropic transcripts once, with provenance to the job", async () => {
      const t = tenant();
      const request = {
        userId: "u",
        format: "anthropic" as const,
        conversations: [
          {
            id: "conv-1",
            system: "You are a travel agent.",
            messages: [
              { role: "user", content: [{ type: "text", text: "I always travel with my dog Rex." }] },
              { role: "assistant", content: "Noted!" },
            ],
          },
        ],
      };
      const { job } = await service.importConversations(t, request);
      const done = await waitForJob(service, t, job.id);
      assert.equal(done.status, "succeeded");
      assert.deepEqual((done.result as { events: unknown }).events, { created: 3, existing: 0, skipped: 0 });
      const again = await waitForJob(service, t, (await service.importConversations(t, request)).job.id);
      assert.deepEqual((again.result as { events: unknown }).events, { created: 0, existing: 3, skipped: 0 });
      const openai = await waitForJob(
        service,
        t,
        (
          await service.importConversations(t, {
            userId: "u",
            format: "openai",
            conversations: [
              {
                messages: [
                  { role: "system", content: "be brief" },
                  { role: "user", content: "My passport expires in March." },
                  { role: "assistant", content: null, tool_calls: [] },
                ],
              },
            ],
          })
        ).job.id,
      );
      assert.deepEqual((openai.result as { events: unknown }).events, {
        created: 2,
        existing: 0,
        skipped: 1,
      });
      const found = await service.search(t, { userId: "u", query: "dog Rex" });
      const memory = found.results[0]?.memory;
      assert.equal(memory?.provenance.importJobId, job.id);
      const chain = await service.chainTrace(t, memory!.id);
      assert.equal(chain.importJob?.id, job.id);
      assert.equal(chain.events[0]?.content, "I always travel with my dog Rex.");
      const listed = await service.listJobs(t, { type: "import" });
      assert.equal(listed.jobs.length, 3);
    });

    it("an import run again never brings back a memory the user deleted or edited; a new turn is added", async () => {
      const t = tenant();
      const turns = [
        { role: "user", content: "I always travel with my dog Rex." },
        { role: "assistant", content: "Noted!" },
        { role: "user", content: "My passport expires in March." },
      ];
      const request = {
        userId: "u",
        format: "openai" as const,
        conversations: [{ id: "trip", messages: turns }],
      };
      const all = async () =>
        (
          await store.listMemories(
            t,
            { userId: "u" },
            { limit: 100, order: "recent", statuses: ["active", "superseded", "archived", "deleted"] },
          )
        )
          .filter((memory) => memory.kind !== "episode")
          .map((memory) => `${memory.status}: ${memory.content}`)
          .sort();
      // Each turn is also kept once as an episode (ADR 0361), whatever the reruns.
      const episodes = async () =>
        (
          await store.listMemories(
            t,
            { userId: "u" },
            { limit: 100, order: "recent", statuses: ["active", "deleted"] },
          )
        )
          .filter((memory) => memory.kind === "episode")
          .map((memory) => `${memory.status}: ${memory.content}`)
          .sort();
      const { job } = await service.importConversations(t, request);
      assert.equal((await waitForJob(service, t, job.id)).status, "succeeded");
      const made = (await store.listMemories(t, { userId: "u" }, { limit: 10, order: "recent" })).filter(
        (memory) => memory.kind !== "episode",
      );
      const rex = made.find((memory) => memory.content.includes("Rex"));
      const passport = made.find((memory) => memory.content.includes("passport"));
      assert.ok(rex && passport, JSON.stringify(made.map((memory) => memory.content)));
      // The user forgets one and corrects the other.
      await service.deleteMemory(t, rex.id, { reason: "the user asked to forget it" });
      await service.updateMemory(t, passport.id, { content: "My passport expires in April." });

      // The same job runs again, as it does when its process died before recording its end.
      const stored = await store.getJob(t, job.id);
      assert.ok(stored);
      const { result: _result, finishedAt: _finished, ...unfinished } = stored;
      await store.updateJob({
        ...unfinished,
        status: "running",
        startedAt: new Date(Date.now() - 60_000).toISOString(),
      });
      const restarted = createMemoryService({ store });
      const rerun = await waitForJob(restarted, t, job.id);
      assert.equal(rerun.status, "succeeded");
      assert.deepEqual((rerun.result as { events: unknown }).events, { created: 0, existing: 3, skipped: 0 });
      const expected = ["active: My passport expires in April.", "deleted: I always travel with my dog Rex."];
      assert.deepEqual(await all(), expected);

      // The same transcript imported again, then once more with a new turn: only the new turn adds.
      const again = await waitForJob(service, t, (await service.importConversations(t, request)).job.id);
      assert.deepEqual((again.result as { events: unknown }).events, { created: 0, existing: 3, skipped: 0 });
      assert.deepEqual(await all(), expected);
      const longer = await waitForJob(
        service,
        t,
        (
          await service.importConversations(t, {
            ...request,
            conversations: [
              {
                id: "trip",
                messages: [...turns, { role: "user", content: "My favourite colour is green." }],
              },
            ],
          })
        ).job.id,
      );
      assert.deepEqual((longer.result as { events: unknown }).events, {
        created: 1,
        existing: 3,
        skipped: 0,
      });
      assert.deepEqual(await all(), ["active: My favourite colour is green.", ...expected]);
      assert.deepEqual(
        await episodes(),
        [
          "active: My favourite colour is green.",
          "active: My passport expires in March.",
          "active: Noted!",
          // Forgetting the fact forgot the turn that said it word for word.
          "deleted: I always travel with my dog Rex.",
        ],
        "the turns kept once each, the forgotten one still forgotten",
      );
      assert.equal((await service.search(t, { userId: "u", query: "dog Rex" })).results.length, 0);
    });

    it("an import whose turn matched a memory of another source never brings that fact back when run again, after the user deleted or edited that memory", async () => {
      const t = tenant();
      const scope = { userId: "u", sessionId: "trip" };
      const active = async () =>
        (await store.listMemories(t, scope, { limit: 100, order: "recent", statuses: ["active"] }))
          .filter((memory) => memory.kind !== "episode")
          .map((memory) => memory.content)
          .sort();
      // The user said both facts elsewhere first (an API add, a live conversation turn).
      const rex = await service.add(t, { ...scope, content: "I always travel with my dog Rex." });
      const passport = await service.add(t, { ...scope, content: "My passport expires in March." });
      const request = {
        ...scope,
        format: "openai" as const,
        conversations: [
          {
            id: "trip",
            messages: [
              { role: "user", content: "I always travel with my dog Rex." },
              { role: "user", content: "My passport expires in March." },
            ],
          },
        ],
      };
      const { job } = await service.importConversations(t, request);
      const done = await waitForJob(service, t, job.id);
      assert.equal((done.result as { memories: number }).memories, 0, "both facts were already held");
      assert.deepEqual(await active(), ["I always travel with my dog Rex.", "My passport expires in March."]);
      // The user forgets one and corrects the other.
      await service.deleteMemory(t, rex.memory.id, { reason: "the user asked to forget it" });
      await service.updateMemory(t, passport.memory.id, { content: "My passport expires in April." });
      // The same job runs again, as it does when its process died before recording its end.
      const stored = await store.getJob(t, job.id);
      assert.ok(stored);
      const { result: _result, finishedAt: _finished, ...unfinished } = stored;
      await store.updateJob({
        ...unfinished,
        status: "running",
        startedAt: new Date(Date.now() - 60_000).toISOString(),
      });
      const restarted = createMemoryService({ store });
      const rerun = await waitForJob(restarted, t, job.id);
      assert.equal(rerun.status, "succeeded");
      assert.deepEqual(
        await active(),
        ["My passport expires in April."],
        "deleted stays deleted, the edit stays",
      );
      assert.equal((await service.search(t, { ...scope, query: "dog Rex" })).results.length, 0);
    });

    it("an event and the memories extracted from it commit together: a write that fails extracting stores neither, and its retry stores both", async () => {
      const t = tenant();
      // A store that fails when the extracted memory is written, after the event was.
      const failing = createMemoryService({
        store: {
          ...store,
          async insertMemory() {
            throw new Error("disk full");
          },
          async insertMemories() {
            throw new Error("disk full");
          },
        },
        resumeJobs: false,
      });
      const request = {
        userId: "u",
        sessionId: "s",
        role: "user" as const,
        content: "I am allergic to peanuts.",
        customId: "turn-1",
        infer: true,
      };
      await assert.rejects(failing.writeEvent(t, request), /disk full/);
      assert.deepEqual((await service.status(t)).counts, {
        ...(await service.status(t)).counts,
        memories: 0,
        events: 0,
      });
      const retried = await service.writeEvent(t, request);
      assert.equal(retried.created, true, "the failed write left no event behind");
      assert.deepEqual(
        retried.memories.map((memory) => memory.content),
        ["I am allergic to peanuts."],
        "the retry extracts what the failed write could not",
      );
    });

    it("consolidation merges near-duplicates (keeping history) and decays stale memories", async () => {
      const t = tenant();
      const a = await service.add(t, {
        userId: "u",
        content: "The user drives a blue Volvo station wagon",
        dedupe: false,
      });
      const b = await service.add(t, {
        userId: "u",
        content: "the user drives a blue Volvo station wagon.",
        dedupe: false,
      });
      const stale = await service.add(t, {
        userId: "u",
        content: "Once mentioned liking jazz",
        importance: 0.15,
      });
      await service.recordFeedback(t, a.memory.id, { rating: "helpful" });
      const later = createMemoryService({
        store,
        now: () => new Date(Date.now() + 200 * 86_400_000),
        resumeJobs: false,
      });
      const { job } = await later.consolidate(t, { userId: "u", staleAfterDays: 90 });
      const done = await waitForJob(later, t, job.id);
      assert.equal(done.status, "succeeded", JSON.stringify(done.error));
      const result = done.result as Record<string, number>;
      assert.equal(result.merged, 1);
      assert.equal(result.superseded, 1);
      assert.equal(result.archived, 1, "the low-importance stale memory is archived");
      const loser = (await service.getMemory(t, b.memory.id)).memory;
      assert.equal(loser.status, "superseded");
      assert.equal(loser.supersededBy, a.memory.id);
      const keeper = (await service.chainTrace(t, a.memory.id)).derivedFrom.map((memory) => memory.id);
      assert.deepEqual(keeper, [b.memory.id]);
      assert.equal((await service.getMemory(t, stale.memory.id)).memory.status, "archived");
      assert.ok(
        (await service.memoryHistory(t, stale.memory.id)).versions.some(
          (version) => version.change === "archive",
        ),
      );
    });

    it("novelty scan, traces, access statistics, jobs and status answer per tenant", async () => {
      const t = tenant();
      await service.add(t, { userId: "u", content: "Carol speaks fluent Portuguese" });
      const scan = await service.noveltyScan(t, {
        userId: "u",
        candidates: ["Carol speaks fluent Portuguese", "Carol owns a sailboat"],
      });
      assert.deepEqual(
        scan.results.map((result) => result.novel),
        [false, true],
      );
      assert.equal((await service.getJob(t, scan.jobId)).job.type, "novelty_scan");
      const search = await service.search(t, { userId: "u", query: "Portuguese" });
      const trace = await service.getTrace(t, search.traceId);
      assert.equal(trace.trace.query, "Portuguese");
      assert.equal(trace.trace.results[0]?.id, search.results[0]?.memory.id);
      assert.equal((await service.listTraces(t, {})).traces.length, 1);
      await rejectsWithCode(service.getTrace(tenant(), search.traceId), "not_found", 404);
      const trends = await service.accessTrends(t, { days: 7 });
      assert.equal(trends.days.length, 7);
      assert.equal(trends.days.at(-1)?.searches, 1);
      assert.equal(trends.days.at(-1)?.hits, 1);
      const summaries = await service.accessSummaries(t, {});
      assert.equal(summaries.top[0]?.content, "Carol speaks fluent Portuguese");
      assert.equal(summaries.totals.searches, 1);
      const status = await service.status(t);
      assert.equal(status.store, store.kind);
      assert.equal(status.counts.memories, 1);
      assert.equal(status.counts.traces, 1);
      const state = await service.unifiedState(t, { userId: "u" });
      assert.equal(state.counts.memories.active, 1);
    });

    it("access summaries count in the store: of 600 memories, only the top `limit` are read", async () => {
      const t = tenant();
      const added = await service.addBatch(t, {
        userId: "u",
        memories: Array.from({ length: 600 }, (_, index) => ({
          content: `Note ${index} about the harbour`,
          dedupe: false,
        })),
      });
      const ids = added.results.map((result) => result.memory.id);
      const at = new Date().toISOString();
      // 450 read once; three of them twice more, and one in another scope.
      await store.recordAccess(t, {
        kind: "read",
        scope: { userId: "u" },
        memoryIds: ids.slice(0, 450),
        at,
      });
      await store.recordAccess(t, { kind: "read", scope: { userId: "u" }, memoryIds: ids.slice(0, 3), at });
      await store.recordAccess(t, { kind: "read", scope: { userId: "u" }, memoryIds: ids.slice(0, 3), at });
      await service.add(t, { userId: "other", content: "Another user's note" });
      await service.deleteMemory(t, ids[449]!, {});

      // Every memory row the store hands the service is counted.
      let rowsRead = 0;
      const counting = new Proxy(store, {
        get(target, key, receiver) {
          const value = Reflect.get(target, key, receiver);
          if (typeof value !== "function" || !/Memor/.test(String(key))) return value;
          return (...args: unknown[]) => {
            const answer = value.apply(target, args);
            return answer instanceof Promise
              ? answer.then((rows: unknown) => {
                  if (Array.isArray(rows)) rowsRead += rows.length;
                  return rows;
                })
              : answer;
          };
        },
      });
      const summaries = await createMemoryService({ store: counting }).accessSummaries(t, {
        userId: "u",
        limit: 5,
      });
      assert.deepEqual(summaries.totals, { memories: 599, accessed: 449, neverAccessed: 150, searches: 0 });
      assert.deepEqual(
        summaries.top.map((entry) => entry.accessCount),
        [3, 3, 3, 1, 1],
      );
      assert.deepEqual(
        summaries.top
          .slice(0, 3)
          .map((entry) => entry.memoryId)
          .sort(),
        ids.slice(0, 3).sort(),
      );
      assert.equal(rowsRead, 5, "the service read the five it lists, not every accessed memory");
    });

    it("bad input is a typed invalid_input error and stores nothing", async () => {
      const t = tenant();
      await rejectsWithCode(service.add(t, { userId: "u", content: "   " }), "invalid_input", 400);
      await rejectsWithCode(
        service.add(t, { userId: "u\u0000", content: "fine" } as never),
        "invalid_input",
        400,
      );
      await rejectsWithCode(
        service.writeEvent(t, { role: "robot", content: "x" } as never),
        "invalid_input",
        400,
      );
      assert.equal((await service.status(t)).counts.memories, 0);
      assert.equal((await service.status(t)).counts.events, 0);
    });

    it("fused ranking with the deterministic test embedder names itself and scores vectors", async () => {
      const t = tenant();
      const fused = createMemoryService({
        store,
        embeddingModel: createHashingTestEmbedder(),
        resumeJobs: false,
      });
      await fused.add(t, { userId: "u", content: "Dana is training for the Berlin marathon" });
      await fused.add(t, { userId: "u", content: "Dana's cat is called Miso" });
      const found = await fused.search(t, { userId: "u", query: "marathon training" });
      assert.equal(found.ranking, "fused");
      assert.match(found.results[0]?.memory.content ?? "", /marathon/);
      assert.equal(typeof found.results[0]?.components.vector, "number");
      const status = await fused.status(t);
      assert.equal(status.embeddingModel, "tackle-test:hashing-test-embedder");
    });

    it("a job left queued by a stopped process runs when a service starts on the store", async () => {
      const t = tenant();
      await service.add(t, { userId: "u", content: "Left-behind job fact", dedupe: false });
      await service.add(t, { userId: "u", content: "left-behind job fact.", dedupe: false });
      const id = randomUUID();
      await store.insertJob({
        id,
        tenantId: t,
        type: "consolidate",
        status: "running",
        userId: "u",
        input: {
          userId: "u",
          similarityThreshold: 0.85,
          staleAfterDays: 90,
          decayFactor: 0.5,
          archiveBelow: 0.1,
        },
        createdAt: new Date(Date.now() - 60_000).toISOString(),
        startedAt: new Date(Date.now() - 60_000).toISOString(),
      });
      const restarted = createMemoryService({ store });
      const job = await waitForJob(restarted, t, id);
      assert.equal(job.status, "succeeded");
      assert.equal((job.result as { superseded: number }).superseded, 1);
    });

    it("a queued job is claimed by exactly one of two processes", async () => {
      const t = tenant();
      const id = randomUUID();
      const at = new Date().toISOString();
      await store.insertJob({
        id,
        tenantId: t,
        type: "consolidate",
        status: "queued",
        input: {},
        createdAt: at,
      });
      const claims = await Promise.all([
        store.claimJob(t, id, at, at),
        store.claimJob(t, id, at, at),
        store.claimJob(tenant(), id, at, at),
      ]);
      assert.deepEqual(claims.filter(Boolean).length, 1);
      assert.equal(claims[2], false, "another tenant cannot claim it");
    });

    it("a write under an idempotency key runs once: concurrent repeats answer its answer, another request is refused, another tenant's key is its own", async () => {
      const [t, other] = [tenant(), tenant()];
      let runs = 0;
      const write = (tenantId: string, content: string) => async () => {
        runs += 1;
        await new Promise((resolve) => setTimeout(resolve, 60));
        return service.add(tenantId, { userId: "ada", kind: "episode", content });
      };
      const request = { content: "Ada: Haha, totally." };
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          service.writeOnce(t, { key: "turn-1", request }, write(t, request.content)),
        ),
      );
      assert.equal(runs, 1, "one of six concurrent requests ran the write");
      assert.equal(new Set(answers.map(({ answer }) => answer.memory.id)).size, 1);
      assert.deepEqual(answers.map(({ replayed }) => replayed).sort(), [false, true, true, true, true, true]);
      assert.equal((await service.status(t)).counts.memories, 1);
      // The same key with another request: refused, and the write is not run.
      await rejectsWithCode(
        service.writeOnce(t, { key: "turn-1", request: { content: "other" } }, write(t, "other")),
        "idempotency_key_reused",
        422,
      );
      assert.equal(runs, 1);
      // Another tenant's key of the same name is its own: its write runs and answers its own memory.
      const theirs = await service.writeOnce(
        other,
        { key: "turn-1", request },
        write(other, request.content),
      );
      assert.equal(theirs.replayed, false);
      assert.equal(runs, 2);
      assert.notEqual(theirs.answer.memory.id, answers[0]?.answer.memory.id);
      // A write that failed frees its key: the retry runs it.
      await assert.rejects(
        service.writeOnce(t, { key: "turn-2", request }, async () => {
          throw new MemoryError("unavailable", "store busy", 503);
        }),
      );
      const retried = await service.writeOnce(t, { key: "turn-2", request }, write(t, "retried"));
      assert.equal(retried.replayed, false);
    });

    it("idempotency keys: a repeat past the wait gets a retryable in_use conflict; keys expire, are replaced and swept", async () => {
      let now = Date.now();
      const timed = createMemoryService({
        store,
        now: () => new Date(now),
        resumeJobs: false,
        idempotency: { ttlMs: 1000, waitMs: 50 },
      });
      const t = tenant();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let entered: () => void = () => {};
      const running = new Promise<void>((resolve) => {
        entered = resolve;
      });
      const first = timed.writeOnce(t, { key: "slow", request: 1 }, async () => {
        entered();
        await gate;
        return "first";
      });
      // The repeat comes while the first write runs (it holds the key), however slow the store's
      // lookup before it was on a loaded machine.
      await running;
      await assert.rejects(
        timed.writeOnce(t, { key: "slow", request: 1 }, async () => "second"),
        (error: unknown) =>
          MemoryError.isInstance(error) &&
          error.code === "idempotency_key_in_use" &&
          error.status === 409 &&
          error.retryable,
      );
      release();
      assert.deepEqual(await first, { answer: "first", replayed: false });
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 1 }, async () => "third"), {
        answer: "first",
        replayed: true,
      });
      // Past its expiry the key is free again, for any request.
      now += 1500;
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 2 }, async () => "fourth"), {
        answer: "fourth",
        replayed: false,
      });
      // Only that record has expired a second later (the suite's others live 24 h).
      assert.equal(await store.sweepIdempotencyKeys(new Date(now + 1000).toISOString()), 1);
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 3 }, async () => "fifth"), {
        answer: "fifth",
        replayed: false,
      });
      await rejectsWithCode(
        timed.writeOnce(t, { key: "", request: 1 }, async () => 0),
        "invalid_input",
        400,
      );
    });

    it("a keyed write and its key's answer commit together: a write that throws after writing leaves nothing, and two services racing on one key store once", async () => {
      const t = tenant();
      const request = { content: "Ada: I booked the window seat." };
      const add = (content: string) => () =>
        service.add(t, { userId: "ada", kind: "episode", content }).then(async (answer) => {
          await new Promise((resolve) => setTimeout(resolve, 40));
          return answer;
        });
      // The memory was inserted, then the write failed before answering: both are rolled back.
      await assert.rejects(
        service.writeOnce(t, { key: "seat", request }, async () => {
          await add(request.content)();
          throw new MemoryError("unavailable", "lost the model", 503);
        }),
        /lost the model/,
      );
      assert.equal((await service.status(t)).counts.memories, 0, "the failed write stored nothing");
      // Two services on one store (two processes on one database) race under one key: each runs
      // the write, the second to record the key rolls its write back and answers the first's answer.
      const other = createMemoryService({ store, resumeJobs: false });
      const answers = await Promise.all([
        service.writeOnce(t, { key: "seat", request }, add(request.content)),
        other.writeOnce(t, { key: "seat", request }, add(request.content)),
      ]);
      assert.deepEqual(answers.map(({ replayed }) => replayed).sort(), [false, true]);
      assert.equal(answers[0]?.answer.memory.id, answers[1]?.answer.memory.id);
      assert.equal((await service.status(t)).counts.memories, 1, "stored once");
      // A job queued inside a keyed write runs once the write commits.
      const submitted = await service.writeOnce(t, { key: "import", request: "import" }, () =>
        service.importConversations(t, {
          userId: "ada",
          format: "openai",
          conversations: [{ messages: [{ role: "user", content: "I am allergic to peanuts." }] }],
        }),
      );
      const job = await waitForJob(service, t, submitted.answer.job.id);
      assert.equal(job.status, "succeeded");
      assert.equal((await service.status(t)).counts.events, 1, "the job ran once, after the commit");
    });

    it("an answer over the kept size is answered once; a repeat is told the write was done (idempotency_answer_not_kept)", async () => {
      const capped = createMemoryService({ store, resumeJobs: false, idempotency: { maxAnswerBytes: 2048 } });
      const t = tenant();
      const small = { userId: "ada", content: "Ada prefers tea." };
      const first = await capped.writeOnce(t, { key: "small", request: small }, () => capped.add(t, small));
      const repeat = await capped.writeOnce(t, { key: "small", request: small }, () => capped.add(t, small));
      assert.deepEqual(repeat, { answer: first.answer, replayed: true }, "a small answer is kept whole");
      const large = { userId: "ada", content: `Ada's long note:${" words of the note".repeat(200)}` };
      const whole = await capped.writeOnce(t, { key: "large", request: large }, () => capped.add(t, large));
      assert.equal(whole.answer.memory.content, large.content, "the first answer is whole");
      await assert.rejects(
        capped.writeOnce(t, { key: "large", request: large }, () => capped.add(t, large)),
        (error: unknown) =>
          MemoryError.isInstance(error) &&
          error.code === "idempotency_answer_not_kept" &&
          error.status === 409 &&
          !error.retryable &&
          (error.data as { bytes: number }).bytes > 2048,
      );
      assert.equal((await capped.status(t)).counts.memories, 2, "the repeat wrote nothing");
    });

    it("data survives closing and reopening the store", async () => {
      const t = tenant();
      const { memory } = await service.add(t, { userId: "u", content: "Persisted across reopen" });
      await service.writeEvent(t, {
        sessionId: "s",
        role: "user",
        content: "persisted event",
        customId: "p-1",
        infer: false,
      });
      await service.close();
      store = await target.open();
      service = createMemoryService({ store });
      assert.equal((await service.getMemory(t, memory.id)).memory.content, "Persisted across reopen");
      const again = await service.writeEvent(t, {
        sessionId: "s",
        role: "user",
        content: "persisted event",
        customId: "p-1",
      });
      assert.equal(again.created, false);
    });
  });
}

/** Polls the job until it ends: 10 s on a quiet machine, scaled by the load (how long a job runs is not tested here). */
async function waitForJob(service: MemoryService, tenantId: string, id: string) {
  const waitMs = underLoadMs(10_000);
  const deadline = performance.now() + waitMs;
  for (;;) {
    const { job } = await service.getJob(tenantId, id);
    if (job.status === "succeeded" || job.status === "failed") return job;
    if (performance.now() > deadline)
      throw new Error(`job ${id} did not finish in ${waitMs} ms (${job.status})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
