/**
 * Tailing a session's conversation oldest first, as a property against an oracle, on each store:
 * while several writers append turns at once (single turns, each its own transaction with the
 * memories it yields, and an import whose batch of turns is one long transaction), a reader pages
 * `recallConversation` with `order: "asc"` and the last event's id as its cursor, and drains once the
 * writers are done. It must have seen every event the session holds at the end exactly once, in the
 * order the session lists them. On PostgreSQL a sequence number is drawn when a row is inserted but
 * transactions commit in any order: a reader that saw 12 committed while 11 was not yet, moved its
 * cursor past 11 and never saw it (most rounds lost events, from the first; ADR 0535).
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the rounds (default 300 on each store, about 20 s in all), from
 * seed `TACKLE_PROPERTY_SEED` (default 7).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep, setImmediate as yieldTurn } from "node:timers/promises";
import { createMemoryService, createSqliteStore, type MemoryEvent, type MemoryService } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, seededRandom, type TestDatabase, testTimeoutMs } from "@tackle/test-support";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 7);
/** How long one round's writers and reader may take before the round fails as stuck. */
const roundDeadlineMs = 30_000;

interface Counters {
  rounds: number;
  events: number;
  pages: number;
  /** Pages read while some write was still in flight: the tail raced the writers. */
  racingPages: number;
  imports: number;
}

interface Plan {
  readonly writers: readonly { userId: string; agentId?: string; turns: number }[];
  /** Messages of an import into the session, or none. */
  readonly imported: number;
  /** The reader's scope: the session alone, or the session and one of its users. */
  readonly readerUserId: string | undefined;
  readonly pageSize: number;
}

function plan(random: () => number): Plan {
  const writers = Array.from({ length: 2 + Math.floor(random() * 4) }, () => ({
    userId: random() < 0.5 ? "u1" : "u2",
    ...(random() < 0.3 ? { agentId: "a1" } : {}),
    turns: 1 + Math.floor(random() * 4),
  }));
  return {
    writers,
    imported: random() < 0.3 ? 10 + Math.floor(random() * 50) : 0,
    readerUserId: random() < 0.3 ? "u1" : undefined,
    pageSize: 1 + Math.floor(random() * 6),
  };
}

/** A user turn states a preference, so its transaction also writes the memory it yields. */
function turnText(writer: number, turn: number): string {
  return turn % 2 === 0
    ? `I really like green tea number ${writer}-${turn} in the morning.`
    : `Noted, tea ${writer}-${turn} it is.`;
}

async function runRound(service: MemoryService, random: () => number, round: number, counters: Counters) {
  const tenantId = `tail-${seed}-${round}`;
  const sessionId = `session-${round}`;
  const { writers, imported, readerUserId, pageSize } = plan(random);
  const deadline = Date.now() + roundDeadlineMs;
  let writing = true;

  const live = writers.map(async (writer, index) => {
    for (let turn = 0; turn < writer.turns; turn += 1) {
      await service.writeEvent(tenantId, {
        userId: writer.userId,
        ...(writer.agentId === undefined ? {} : { agentId: writer.agentId }),
        sessionId,
        role: turn % 2 === 0 ? "user" : "assistant",
        content: turnText(index, turn),
      });
    }
  });
  const importing =
    imported === 0
      ? Promise.resolve()
      : (async () => {
          const messages = Array.from({ length: imported }, (_, index) => ({
            role: index % 2 === 0 ? "user" : "assistant",
            content: turnText(99, index),
          }));
          const { job } = await service.importConversations(tenantId, {
            userId: "u1",
            sessionId,
            format: "openai",
            conversations: [{ messages }],
          });
          counters.imports += 1;
          for (;;) {
            const { job: now } = await service.getJob(tenantId, job.id);
            if (now.status === "succeeded") return;
            assert.notEqual(now.status, "failed", JSON.stringify(now.error));
            assert.ok(Date.now() < deadline, "the import did not finish in time");
            await sleep(2);
          }
        })();
  const writes = Promise.all([...live, importing]).finally(() => {
    writing = false;
  });
  // Awaited once the tail has drained: a writer's failure is thrown there.
  writes.catch(() => undefined);

  const scope = { sessionId, ...(readerUserId === undefined ? {} : { userId: readerUserId }) };
  const seen: MemoryEvent[] = [];
  let cursor: string | undefined;
  // The tail: pages on from the last event seen; once the writers are done, one more empty page ends it.
  for (;;) {
    const done = !writing;
    const { events } = await service.recallConversation(tenantId, {
      ...scope,
      order: "asc",
      limit: pageSize,
      ...(cursor === undefined ? {} : { cursor }),
    });
    counters.pages += 1;
    if (!done) counters.racingPages += 1;
    seen.push(...events);
    if (events.length > 0) cursor = events.at(-1)!.id;
    else if (done) break;
    else await yieldTurn();
    assert.ok(Date.now() < deadline, "the tail did not end in time");
  }
  await writes;

  // The oracle: what the session holds once every writer is done, read in one page per 200.
  const held: MemoryEvent[] = [];
  for (let after: string | undefined; ; ) {
    const page = await service.recallConversation(tenantId, {
      ...scope,
      order: "asc",
      limit: 200,
      ...(after === undefined ? {} : { cursor: after }),
    });
    held.push(...page.events);
    if (page.nextCursor === undefined) break;
    after = page.nextCursor;
  }
  const expected =
    writers.reduce(
      (sum, writer) =>
        sum + (readerUserId === undefined || writer.userId === readerUserId ? writer.turns : 0),
      0,
    ) + imported;
  assert.equal(held.length, expected, "the session holds every turn written, once");
  const seenIds = seen.map((event) => event.id);
  const skipped = held.filter((event) => !seenIds.includes(event.id));
  const duplicated = seenIds.filter((id, index) => seenIds.indexOf(id) !== index);
  assert.deepEqual(
    { skipped: skipped.map((event) => event.content), duplicated },
    { skipped: [], duplicated: [] },
    "the tail saw every event once",
  );
  assert.deepEqual(
    seenIds,
    held.map((event) => event.id),
    "the tail saw the events in the order the session lists them",
  );
  counters.rounds += 1;
  counters.events += held.length;
}

async function runProperty(service: MemoryService, count: number): Promise<Counters> {
  const random = seededRandom(seed);
  const counters: Counters = { rounds: 0, events: 0, pages: 0, racingPages: 0, imports: 0 };
  for (let round = 1; round <= count; round += 1) {
    try {
      await runRound(service, random, round, counters);
    } catch (error) {
      throw new Error(`round ${round} of seed ${seed} failed (${JSON.stringify(counters)})`, {
        cause: error,
      });
    }
  }
  // Not vacuous: the tail read while writes were in flight, imports among them.
  assert.ok(counters.racingPages > count && counters.imports > count / 10, JSON.stringify(counters));
  return counters;
}

describe("a conversation tailed oldest first (property against an oracle)", {
  timeout: testTimeoutMs(150_000),
}, () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-tail-"));
  let database: TestDatabase | undefined;
  const services: MemoryService[] = [];
  after(async () => {
    for (const service of services) await service.close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("SQLite file: the tail sees every event once, in order", async () => {
    const service = createMemoryService({ store: createSqliteStore({ path: join(directory, "tail.db") }) });
    services.push(service);
    const counters = await runProperty(service, rounds(300));
    console.log(`SQLite: ${JSON.stringify(counters)}`);
  });

  it("PostgreSQL: the tail sees every event once, in order, though transactions commit out of order", async () => {
    database = await createTestDatabase("tackle_memory_tail");
    const service = createMemoryService({
      store: await createPostgresStore({ connectionString: database.url }),
    });
    services.push(service);
    const counters = await runProperty(service, rounds(300));
    console.log(`PostgreSQL: ${JSON.stringify(counters)}`);
  });
});
