/** Store conformance. Events: custom ids, batches in order, the chain back from a memory, commits with what they yield. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { ConformanceCases } from "./cases.ts";

export const eventsCases: ConformanceCases = {
  "events: one custom id written concurrently stores one event; recall pages by session": async ({
    service,
    tenant,
  }) => {
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
    assert.equal(writes.flatMap((write) => write.memories).length, 1, "the extracted memory is stored once");
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
  },
  "a batch of events is stored in order; a taken custom id answers the event holding it, in or before the batch":
    async ({ store, tenant }) => {
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
    },
  "chain trace leads from an extracted memory back to its event": async ({ service, tenant }) => {
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
  },
  "an event and the memories extracted from it commit together: a write that fails extracting stores neither, and its retry stores both":
    async ({ serviceOver, store, service, tenant }) => {
      const t = tenant();
      // A store that fails when the extracted memory is written, after the event was.
      const failing = serviceOver({
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
    },
};
