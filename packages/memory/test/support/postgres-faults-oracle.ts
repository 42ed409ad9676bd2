/**
 * For postgres-faults.property.test.ts: once the relay heals, the service serves again within a bound,
 * holds no lock or transaction open, finishes every import, and the store — listed, read by history,
 * and searched through the service's in-process snapshot — is the oracle's model.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { MemoryClient } from "@tackle/memory";
import { underLoadMs } from "@tackle/test-support";
import type { FaultyService } from "./postgres-faults.ts";
import type { Model } from "./postgres-faults-model.ts";

/** How long the service takes to answer a search and a write again once the relay healed (throws past the bound). */
export async function recovery(client: MemoryClient, userId: string): Promise<number> {
  const started = Date.now();
  const boundMs = underLoadMs(10_000);
  for (;;) {
    try {
      await client.search({ userId, query: "recovery" });
      await client.writeEvent({
        userId,
        sessionId: `${userId}-recovery`,
        role: "user",
        content: "back",
        infer: false,
      });
      return Date.now() - started;
    } catch (error) {
      assert.ok(
        Date.now() - started < boundMs,
        `not serving ${boundMs} ms after the relay healed: ${String(error)}`,
      );
      await sleep(50);
    }
  }
}

/** No session of the service's is left idle in a transaction or holding an advisory lock. */
export async function nothingHeld(service: FaultyService): Promise<void> {
  const deadline = Date.now() + underLoadMs(5_000);
  for (;;) {
    const held = await service.held();
    if (held.advisory === 0 && held.idleInTransaction === 0) return;
    assert.ok(Date.now() < deadline, `held after the faults: ${JSON.stringify(held)}`);
    await sleep(50);
  }
}

/** A lease the service renews every 5 s (a third of its 15 s) unchanged this long is one no process renews. */
const unrenewedMs = 10_000;

/**
 * Every import succeeds within `boundMs` of the heal: a job waits out its retry's backoff (which
 * grows no longer than the faults lasted), never a lease its own process lost track of — read from the
 * database, a running job's lease is renewed or the job claimed again before it stands still for
 * `unrenewedMs`, whatever the load.
 */
export async function jobsSucceeded(
  client: MemoryClient,
  service: FaultyService,
  model: Model,
  boundMs: number,
): Promise<void> {
  const deadline = Date.now() + boundMs;
  const leases = new Map<string, { until: string; since: number }>();
  const pending = new Set(model.jobs);
  while (pending.size > 0) {
    for (const id of pending) {
      const { job } = await client.getJob(id);
      assert.notEqual(job.status, "failed", `import ${id}: ${JSON.stringify(job.error)}`);
      if (job.status === "succeeded") pending.delete(id);
    }
    const { rows } = await service.direct.query(
      "SELECT id, lease_until::text AS until FROM memory_jobs WHERE status = 'running' AND id = ANY($1)",
      [[...pending]],
    );
    for (const { id, until } of rows as { id: string; until: string }[]) {
      const seen = leases.get(id);
      if (seen?.until !== until) leases.set(id, { until, since: Date.now() });
      else
        assert.ok(
          Date.now() - seen.since < unrenewedMs,
          `import ${id} waits out a lease (until ${until}) no process renews`,
        );
    }
    if (pending.size === 0) return;
    assert.ok(
      Date.now() < deadline,
      `imports ${[...pending].join(", ")} unfinished ${boundMs} ms after the heal`,
    );
    await sleep(50);
  }
}

interface Listed {
  readonly id: string;
  readonly content: string;
  readonly status: string;
}

async function listAll(client: MemoryClient, userId: string): Promise<Listed[]> {
  const all: Listed[] = [];
  for (const status of ["active", "deleted"] as const) {
    let cursor: string | undefined;
    do {
      const page = await client.listMemories({ userId, status, limit: 200, ...(cursor ? { cursor } : {}) });
      all.push(...page.memories);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  }
  return all;
}

const wordIn = (content: string) => /^Ada (?:noted|changed) (\S+)/.exec(content)?.[1];

/** The memories listed, their histories and feedback: each acknowledged write once, each refused one never. */
export async function storeIsModel(client: MemoryClient, model: Model): Promise<Listed[]> {
  const listed = await listAll(client, model.userId);
  const byWord = new Map<string, Listed[]>();
  for (const memory of listed) {
    const word = wordIn(memory.content);
    if (word !== undefined) byWord.set(word, [...(byWord.get(word) ?? []), memory]);
  }
  for (const memory of model.memories.values()) {
    const found = listed.filter((row) => row.id === memory.id);
    assert.equal(found.length, 1, `${memory.id} (${memory.word}) listed ${found.length} times`);
    assert.equal(found[0]!.content, memory.content, memory.id);
    assert.equal(found[0]!.status, memory.status, memory.id);
    assert.deepEqual(byWord.get(memory.word)?.length, 1, `${memory.word} stored more than once`);
    const { versions } = await client.memoryHistory(memory.id, { scope: { userId: model.userId } });
    assert.deepEqual(
      versions.map((version) => version.change),
      memory.changes,
      `history of ${memory.id}`,
    );
    const { memory: read } = await client.getMemory(memory.id, { scope: { userId: model.userId } });
    assert.deepEqual(read.feedback, { helpful: memory.helpful, unhelpful: memory.unhelpful }, memory.id);
  }
  for (const word of model.absentWords)
    assert.equal(byWord.get(word), undefined, `refused ${word} was stored`);
  for (const word of model.maybeWords)
    assert.ok(
      (byWord.get(word)?.length ?? 0) <= 1,
      `unkeyed ${word} stored ${byWord.get(word)?.length} times`,
    );
  const known = new Set([
    ...[...model.memories.values()].flatMap((memory) => [memory.word, ...memory.oldWords]),
    ...model.maybeWords,
  ]);
  for (const [word, rows] of byWord)
    assert.ok(known.has(word), `${word} stored, never sent: ${JSON.stringify(rows)}`);
  return listed;
}

/** Each session's events: an acknowledged one (or an imported turn) once, an unkeyed 503'd one at most once. */
export async function eventsAreModel(client: MemoryClient, model: Model): Promise<void> {
  const sessions = new Set([...model.events.keys(), ...model.maybeEvents.keys()]);
  for (const sessionId of sessions) {
    const contents: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.recallConversation({
        userId: model.userId,
        sessionId,
        order: "asc",
        limit: 200,
        ...(cursor ? { cursor } : {}),
      });
      contents.push(...page.events.map((event) => event.content));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    const count = (content: string) => contents.filter((one) => one === content).length;
    const maybe = model.maybeEvents.get(sessionId) ?? [];
    for (const content of model.events.get(sessionId) ?? [])
      assert.equal(count(content), 1, `${sessionId}: ${content}`);
    for (const content of maybe)
      assert.ok(count(content) <= 1, `${sessionId}: unkeyed ${content} ${count(content)} times`);
    const expected = new Set([...(model.events.get(sessionId) ?? []), ...maybe]);
    assert.deepEqual(
      contents.filter((content) => !expected.has(content)),
      [],
      `${sessionId}: events never sent`,
    );
  }
}

/**
 * A search through the service's snapshot answers what the store holds: every active memory by its
 * word, none by a word it no longer holds, a deleted or refused one never, an unkeyed 503'd one
 * exactly when it is listed; a purged user's words find nothing.
 */
export async function searchIsStore(
  client: MemoryClient,
  model: Model,
  listed: readonly Listed[],
): Promise<void> {
  const userId = model.userId;
  const hits = async (word: string, user = userId) =>
    (await client.search({ userId: user, query: word, limit: 20 })).results
      .filter((result) => result.memory.content.split(" ").includes(word))
      .map((result) => result.memory.id);
  for (const memory of model.memories.values()) {
    const expected = memory.status === "active" ? [memory.id] : [];
    assert.deepEqual(
      await hits(memory.word),
      expected,
      `search ${memory.word} (${memory.status} ${memory.id})`,
    );
    for (const old of memory.oldWords)
      assert.deepEqual(await hits(old), [], `search old ${old} of ${memory.id}`);
  }
  for (const word of model.absentWords) assert.deepEqual(await hits(word), [], `search refused ${word}`);
  for (const word of model.maybeWords) {
    const stored = listed.filter(
      (memory) => memory.status === "active" && memory.content.split(" ").includes(word),
    );
    assert.deepEqual(
      await hits(word),
      stored.map((memory) => memory.id),
      `search unkeyed ${word}`,
    );
  }
  for (const { userId: purged, words } of model.purged) {
    assert.deepEqual((await client.listMemories({ userId: purged })).memories, [], `${purged} purged`);
    for (const word of words) assert.deepEqual(await hits(word, purged), [], `search purged ${word}`);
  }
}
