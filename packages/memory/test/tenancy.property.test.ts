/**
 * Tenant isolation as a property: random operations by two tenants, run concurrently on each store,
 * never answer anything of the other tenant (its marker or its ids), never widen the scope asked, and
 * every operation by the other tenant's id answers `not_found` and changes nothing.
 *
 * Each round first stores data for both tenants (so reads have something to leak and foreign-id
 * operations have real ids to aim at), then runs the random plan concurrently. Counters at the end
 * make the property fail if it ever goes vacuous again (reads that see nothing, foreign-id operations
 * that never run).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setImmediate as yieldToOthers } from "node:timers/promises";
import {
  createMemoryService,
  createSqliteStore,
  MemoryError,
  type MemoryService,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import fc from "fast-check";

/** Reads by the tenant's own identity: each must see the tenant's own seeded data, never the other's. */
const readOperations = ["search", "recall", "knowledge", "profile", "bundle", "state"] as const;

/** Operations aimed at one of the other tenant's ids: each must answer `not_found`. */
const foreignOperations = [
  "getForeign",
  "updateForeign",
  "deleteForeign",
  "historyForeign",
  "feedbackForeign",
  "outcomeForeign",
  "chainForeign",
  "traceForeign",
] as const;

const operations = [
  "add",
  "event",
  "ingest",
  "selfEdit",
  "traces",
  ...readOperations,
  ...foreignOperations,
] as const;

type ReadOperation = (typeof readOperations)[number];
type ForeignOperation = (typeof foreignOperations)[number];

const users = ["u1", "u2"] as const;
const agents = ["a1", "a2"] as const;
const words = ["apple", "banana", "cherry"] as const;
const markers = ["@@TA@@", "@@TB@@"] as const;

const operationArbitrary = fc.record({
  tenant: fc.integer({ min: 0, max: 1 }),
  op: fc.constantFrom(...operations),
  userId: fc.constantFrom(...users),
  agentId: fc.option(fc.constantFrom(...agents), { nil: undefined }),
  word: fc.constantFrom(...words),
  text: fc.string({ minLength: 1, maxLength: 20 }),
  /** Which of the other tenant's ids a foreign operation aims at (modulo how many there are then). */
  pick: fc.nat(),
  /** Whether a foreign operation also names a scope (the same user names exist in both tenants). */
  scoped: fc.boolean(),
});

type Operation = typeof operationArbitrary extends fc.Arbitrary<infer T> ? T : never;

/** What one tenant owns in a round; the other tenant's operations aim at these. */
interface TenantIds {
  memories: Set<string>;
  events: Set<string>;
  documents: Set<string>;
  traces: Set<string>;
}

interface Counters {
  foreignPlanned: number;
  foreignExecuted: number;
  foreignNotFound: number;
  reads: Record<ReadOperation, { executed: number; nonEmpty: number }>;
}

function emptyCounters(): Counters {
  const reads = {} as Counters["reads"];
  for (const operation of readOperations) reads[operation] = { executed: 0, nonEmpty: 0 };
  return { foreignPlanned: 0, foreignExecuted: 0, foreignNotFound: 0, reads };
}

function isForeign(op: Operation["op"]): op is ForeignOperation {
  return (foreignOperations as readonly string[]).includes(op);
}

/** Stores, for every tenant, user and agent, one memory, one user event and one document; awaited. */
async function seed(service: MemoryService, tenants: readonly string[], ids: readonly TenantIds[]) {
  const writes: Promise<void>[] = [];
  for (const [index, tenantId] of tenants.entries()) {
    const own = ids[index]!;
    const marker = markers[index]!;
    for (const userId of users) {
      for (const agentId of agents) {
        const scope = { userId, agentId };
        const content = `${marker} ${userId} ${agentId} apple banana cherry note`;
        writes.push(
          (async () => {
            const added = await service.add(tenantId, { ...scope, content, kind: "preference" });
            own.memories.add(added.memory.id);
            // The same custom id in both tenants: each tenant must get its own event.
            const written = await service.writeEvent(tenantId, {
              ...scope,
              sessionId: "s",
              role: "user",
              content: `I like ${content}`,
              customId: `seed-${userId}-${agentId}`,
            });
            assert.equal(written.created, true, "a custom id of the other tenant swallowed this event");
            own.events.add(written.event.id);
            for (const memory of written.memories) own.memories.add(memory.id);
            const ingested = await service.ingestDocument(tenantId, { ...scope, title: marker, content });
            own.documents.add(ingested.document.id);
            const found = await service.search(tenantId, { ...scope, query: "apple" });
            own.traces.add(found.traceId);
          })(),
        );
      }
    }
  }
  await Promise.all(writes);
}

/** Whether a read answered anything of the tenant's own data. */
function sawData(op: ReadOperation, answer: unknown): boolean {
  const value = answer as Record<string, unknown[] | Record<string, unknown[]>>;
  switch (op) {
    case "search":
    case "knowledge":
      return (value.results as unknown[]).length > 0;
    case "recall":
      return (value.events as unknown[]).length > 0;
    case "profile":
      return ((value.profile as Record<string, unknown[]>).memoryIds ?? []).length > 0;
    case "bundle":
      // Each fact once: a turn that says what a memory says is not repeated in the recent turns.
      return (value.memories as unknown[]).length > 0 || (value.recentEvents as unknown[]).length > 0;
    case "state":
      return (value.recentMemories as unknown[]).length > 0 && (value.recentEvents as unknown[]).length > 0;
  }
}

/** One round of the property: the two tenants, what each owns, and the counters across rounds. */
interface Round {
  readonly service: MemoryService;
  readonly tenants: readonly string[];
  readonly ids: readonly TenantIds[];
  readonly counters: Counters;
}

/** What an operation runs as: its tenant, the other one, its scope and the text it writes. */
interface Acting {
  readonly self: 0 | 1;
  readonly other: 0 | 1;
  readonly tenantId: string;
  readonly scope: { readonly userId: string; readonly agentId?: string };
  readonly content: string;
}

/** An operation on the tenant's own data; what it wrote is added to the tenant's ids. */
async function runOwn(round: Round, operation: Operation, acting: Acting): Promise<unknown> {
  const { service, ids } = round;
  const { self, tenantId, scope, content } = acting;
  let answer: unknown;
  switch (operation.op) {
    case "add": {
      const added = await service.add(tenantId, { ...scope, content });
      ids[self]!.memories.add(added.memory.id);
      answer = added;
      break;
    }
    case "event": {
      const written = await service.writeEvent(tenantId, {
        ...scope,
        sessionId: "s",
        role: "user",
        content: `I like ${content}`,
        // The same custom ids in both tenants (a custom id is unique per tenant and refused
        // across scopes of one tenant, so it names the scope too).
        customId: `shared-${operation.word}-${operation.userId}-${operation.agentId ?? ""}`,
      });
      ids[self]!.events.add(written.event.id);
      for (const memory of written.memories) ids[self]!.memories.add(memory.id);
      answer = written;
      break;
    }
    case "ingest": {
      const ingested = await service.ingestDocument(tenantId, {
        ...scope,
        title: markers[self]!,
        content,
      });
      ids[self]!.documents.add(ingested.document.id);
      answer = ingested;
      break;
    }
    case "selfEdit":
      answer = await service.selfEdit(tenantId, {
        ...scope,
        edits: [{ op: "append", label: "human", text: markers[self]! }],
      });
      break;
    case "traces":
      answer = await service.listTraces(tenantId, {});
      break;
    case "search": {
      const found = await service.search(tenantId, { ...scope, query: `${operation.word} note` });
      ids[self]!.traces.add(found.traceId);
      for (const result of found.results) {
        assert.equal(result.memory.userId, scope.userId, "scope widened: userId");
        if (scope.agentId) assert.equal(result.memory.agentId, scope.agentId, "scope widened: agentId");
      }
      answer = found;
      break;
    }
    case "recall":
      answer = await service.recallConversation(tenantId, { ...scope, sessionId: "s" });
      break;
    case "knowledge":
      answer = await service.searchKnowledge(tenantId, { ...scope, query: operation.word });
      break;
    case "profile":
      answer = await service.profile(tenantId, scope);
      break;
    case "bundle":
      answer = await service.contextBundle(tenantId, { ...scope, query: operation.word });
      break;
    case "state":
      answer = await service.unifiedState(tenantId, scope);
      break;
  }
  return answer;
}

/** An operation aimed at one of the other tenant's ids. */
async function runForeign(
  service: MemoryService,
  operation: Operation,
  tenantId: string,
  foreignId: string | undefined,
): Promise<unknown> {
  const byIdScope = operation.scoped ? { userId: operation.userId } : undefined;
  let answer: unknown;
  switch (operation.op) {
    case "getForeign":
      answer = await service.getMemory(tenantId, foreignId!, byIdScope);
      break;
    case "updateForeign":
      answer = await service.updateMemory(tenantId, foreignId!, { content: "hijacked" }, byIdScope);
      break;
    case "deleteForeign":
      answer = await service.deleteMemory(tenantId, foreignId!, { reason: "hijacked" }, byIdScope);
      break;
    case "historyForeign":
      answer = await service.memoryHistory(tenantId, foreignId!, byIdScope);
      break;
    case "feedbackForeign":
      answer = await service.recordFeedback(tenantId, foreignId!, { rating: "helpful" }, byIdScope);
      break;
    case "outcomeForeign":
      answer = await service.recordProcedureOutcome(
        tenantId,
        foreignId!,
        { success: true, note: "hijacked" },
        byIdScope,
      );
      break;
    case "chainForeign":
      answer = await service.chainTrace(tenantId, foreignId!, byIdScope);
      break;
    case "traceForeign":
      answer = await service.getTrace(tenantId, foreignId!);
      break;
  }
  return answer;
}

/** An answer holds nothing of the other tenant (its marker, its ids); a read is counted. */
function assertOwnAnswer(round: Round, operation: Operation, acting: Acting, answer: unknown): void {
  const { self, other } = acting;
  const text = JSON.stringify(answer ?? null);
  assert.ok(
    !text.includes(markers[other]!),
    `tenant ${self} saw the other tenant's data with ${operation.op}: ${text.slice(0, 300)}`,
  );
  for (const set of Object.values(round.ids[other]!) as Set<string>[]) {
    for (const id of set) {
      assert.ok(!text.includes(id), `tenant ${self} saw the other tenant's id ${id} with ${operation.op}`);
    }
  }
  if ((readOperations as readonly string[]).includes(operation.op)) {
    const read = round.counters.reads[operation.op as ReadOperation];
    read.executed += 1;
    if (sawData(operation.op as ReadOperation, answer)) read.nonEmpty += 1;
  }
}

/** One planned operation, run concurrently with the rest of the plan. */
async function runOperation(round: Round, operation: Operation): Promise<void> {
  const { service, tenants, ids, counters } = round;
  const self = operation.tenant as 0 | 1;
  const other = (1 - self) as 0 | 1;
  const tenantId = tenants[self]!;
  const scope = {
    userId: operation.userId,
    ...(operation.agentId ? { agentId: operation.agentId } : {}),
  };
  const content = `${markers[self]} ${operation.word} ${operation.text.replace(/\s+/g, " ")} note`;
  // Let the other operations start first, so foreign ids are read while writes are in flight.
  await yieldToOthers();
  const foreignPool = [...(operation.op === "traceForeign" ? ids[other]!.traces : ids[other]!.memories)];
  const foreignId = foreignPool[operation.pick % foreignPool.length];
  if (isForeign(operation.op)) {
    counters.foreignPlanned += 1;
    assert.ok(foreignId, `no id of the other tenant to aim ${operation.op} at`);
    counters.foreignExecuted += 1;
  }
  const acting: Acting = { self, other, tenantId, scope, content };
  let answer: unknown;
  try {
    answer = isForeign(operation.op)
      ? await runForeign(service, operation, tenantId, foreignId)
      : await runOwn(round, operation, acting);
  } catch (error) {
    // Reaching for the other tenant's ids must fail as not found, never succeed or leak.
    if (isForeign(operation.op) && MemoryError.isInstance(error) && error.code === "not_found") {
      counters.foreignNotFound += 1;
      return;
    }
    throw error;
  }
  if (isForeign(operation.op)) {
    assert.fail(
      `tenant ${self} reached the other tenant's id with ${operation.op}: ${JSON.stringify(answer).slice(0, 300)}`,
    );
  }
  assertOwnAnswer(round, operation, acting, answer);
}

/** After a round, each tenant's state and every memory it owns are as its own operations left them. */
async function assertTenantsUntouched(round: Round): Promise<void> {
  const { service, tenants, ids } = round;
  for (const [index, tenantId] of tenants.entries()) {
    const state = JSON.stringify(await service.unifiedState(tenantId, { wholeTenant: true }));
    assert.ok(!state.includes(markers[1 - index]!), "the other tenant's data is in this tenant's state");
    assert.ok(!state.includes("hijacked"), "a foreign update landed");
    // Every memory of this tenant is exactly as its owner left it: no foreign update, delete,
    // feedback or outcome landed on it.
    for (const id of ids[index]!.memories) {
      const { memory } = await service.getMemory(tenantId, id);
      assert.equal(memory.status, "active", `memory ${id} was deleted by the other tenant`);
      assert.ok(!memory.content.includes("hijacked"), `memory ${id} was updated by the other tenant`);
      assert.deepEqual(memory.feedback, { helpful: 0, unhelpful: 0 }, `feedback landed on ${id}`);
      assert.deepEqual(memory.outcomes, { successes: 0, failures: 0 }, `an outcome landed on ${id}`);
      const { versions } = await service.memoryHistory(tenantId, id);
      assert.deepEqual(
        versions.map((version) => version.change),
        ["create"],
        `memory ${id} gained history from the other tenant`,
      );
    }
    for (const id of ids[index]!.traces) await service.getTrace(tenantId, id);
  }
}

async function runProperty(service: MemoryService, runs: number): Promise<Counters> {
  const counters = emptyCounters();
  let round = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(operationArbitrary, { minLength: 4, maxLength: 24 }), async (plan) => {
      round += 1;
      const tenants = [`tenant-a-${round}-${Math.random()}`, `tenant-b-${round}-${Math.random()}`];
      const ids: TenantIds[] = tenants.map(() => ({
        memories: new Set(),
        events: new Set(),
        documents: new Set(),
        traces: new Set(),
      }));
      await seed(service, tenants, ids);
      const current: Round = { service, tenants, ids, counters };
      // Both tenants' operations start at once and interleave on the store.
      await Promise.all(plan.map((operation) => runOperation(current, operation)));
      await assertTenantsUntouched(current);
    }),
    { numRuns: runs },
  );
  return counters;
}

/** The property is only worth something if it exercised what it claims to; fail when it went vacuous. */
function assertNotVacuous(counters: Counters, runs: number) {
  assert.ok(
    counters.foreignExecuted >= runs,
    `only ${counters.foreignExecuted} foreign-id operations ran in ${runs} rounds`,
  );
  assert.equal(counters.foreignExecuted, counters.foreignPlanned, "a foreign-id operation ran without an id");
  assert.equal(
    counters.foreignNotFound,
    counters.foreignExecuted,
    "a foreign-id operation did not answer not_found",
  );
  for (const [operation, read] of Object.entries(counters.reads)) {
    assert.ok(read.executed >= runs / 8, `only ${read.executed} ${operation} reads ran in ${runs} rounds`);
    // Every round seeded every identity a read can name, so every read must see its own tenant's data.
    assert.equal(
      read.nonEmpty,
      read.executed,
      `${operation}: ${read.nonEmpty}/${read.executed} reads saw data`,
    );
  }
}

describe("tenant isolation under concurrency (property)", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-tenancy-"));
  let database: TestDatabase | undefined;
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers) await close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  const open = async (store: MemoryStore) => {
    const service = createMemoryService({ store });
    closers.push(() => service.close());
    return service;
  };

  it("SQLite: no operation of one tenant reads or changes the other's data", async () => {
    const runs = 100;
    const service = await open(createSqliteStore({ path: join(directory, "tenancy.db") }));
    assertNotVacuous(await runProperty(service, runs), runs);
  });

  it("PostgreSQL: no operation of one tenant reads or changes the other's data", async () => {
    database = await createTestDatabase("tackle_memory_tenancy");
    const runs = 60;
    const service = await open(await createPostgresStore({ connectionString: database.url }));
    assertNotVacuous(await runProperty(service, runs), runs);
  });
});
