/**
 * Tenant isolation as a property: random operations by two tenants, run concurrently on each store,
 * never answer anything of the other tenant (its marker or its ids), and never widen the scope asked.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
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

const operations = [
  "add",
  "event",
  "search",
  "recall",
  "ingest",
  "knowledge",
  "selfEdit",
  "profile",
  "bundle",
  "state",
  "traces",
  "readForeign",
  "updateForeign",
  "feedbackForeign",
  "chainForeign",
] as const;

const operationArbitrary = fc.record({
  tenant: fc.integer({ min: 0, max: 1 }),
  op: fc.constantFrom(...operations),
  userId: fc.constantFrom("u1", "u2"),
  agentId: fc.option(fc.constantFrom("a1", "a2"), { nil: undefined }),
  word: fc.constantFrom("apple", "banana", "cherry"),
  text: fc.string({ minLength: 1, maxLength: 20 }),
});

type Operation = typeof operationArbitrary extends fc.Arbitrary<infer T> ? T : never;

async function runProperty(service: MemoryService, runs: number) {
  let round = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(operationArbitrary, { minLength: 4, maxLength: 24 }), async (plan) => {
      round += 1;
      const tenants = [`tenant-a-${round}-${Math.random()}`, `tenant-b-${round}-${Math.random()}`];
      const markers = ["@@TA@@", "@@TB@@"];
      const ids: [Set<string>, Set<string>] = [new Set(), new Set()];
      const run = async (operation: Operation) => {
        const self = operation.tenant as 0 | 1;
        const other = (1 - self) as 0 | 1;
        const tenantId = tenants[self]!;
        const scope = {
          userId: operation.userId,
          ...(operation.agentId ? { agentId: operation.agentId } : {}),
        };
        const content = `${markers[self]} ${operation.word} ${operation.text.replace(/\s+/g, " ")} note`;
        const foreignId = [...ids[other]][0];
        let answer: unknown;
        try {
          switch (operation.op) {
            case "add": {
              const added = await service.add(tenantId, { ...scope, content });
              ids[self].add(added.memory.id);
              answer = added;
              break;
            }
            case "event": {
              const written = await service.writeEvent(tenantId, {
                ...scope,
                sessionId: "s",
                role: "user",
                content: `I like ${content}`,
                customId: `shared-${operation.word}`,
              });
              ids[self].add(written.event.id);
              answer = written;
              break;
            }
            case "search": {
              const found = await service.search(tenantId, { ...scope, query: `${operation.word} note` });
              for (const result of found.results) {
                assert.equal(result.memory.userId, scope.userId, "scope widened: userId");
                if (scope.agentId)
                  assert.equal(result.memory.agentId, scope.agentId, "scope widened: agentId");
              }
              answer = found;
              break;
            }
            case "recall":
              answer = await service.recallConversation(tenantId, { ...scope, sessionId: "s" });
              break;
            case "ingest": {
              const ingested = await service.ingestDocument(tenantId, {
                ...scope,
                title: markers[self]!,
                content,
              });
              ids[self].add(ingested.document.id);
              answer = ingested;
              break;
            }
            case "knowledge":
              answer = await service.searchKnowledge(tenantId, { ...scope, query: operation.word });
              break;
            case "selfEdit":
              answer = await service.selfEdit(tenantId, {
                ...scope,
                edits: [{ op: "append", label: "human", text: markers[self]! }],
              });
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
            case "traces":
              answer = await service.listTraces(tenantId, {});
              break;
            case "readForeign":
              if (foreignId) answer = await service.getMemory(tenantId, foreignId);
              break;
            case "updateForeign":
              if (foreignId)
                answer = await service.updateMemory(tenantId, foreignId, { content: "hijacked" });
              break;
            case "feedbackForeign":
              if (foreignId)
                answer = await service.recordFeedback(tenantId, foreignId, { rating: "helpful" });
              break;
            case "chainForeign":
              if (foreignId) answer = await service.chainTrace(tenantId, foreignId);
              break;
          }
        } catch (error) {
          // Reaching for the other tenant's ids must fail as not found, never succeed or leak.
          if (MemoryError.isInstance(error) && error.code === "not_found") return;
          throw error;
        }
        const text = JSON.stringify(answer ?? null);
        assert.ok(
          !text.includes(markers[other]!),
          `tenant ${self} saw the other tenant's data: ${text.slice(0, 300)}`,
        );
        for (const id of ids[other])
          assert.ok(!text.includes(id), `tenant ${self} saw the other tenant's id ${id}`);
      };
      // Both tenants' operations start at once and interleave on the store.
      await Promise.all(plan.map((operation) => run(operation)));
      for (const [index, tenantId] of tenants.entries()) {
        const state = JSON.stringify(await service.unifiedState(tenantId, {}));
        assert.ok(!state.includes(markers[1 - index]!));
        assert.ok(!state.includes("hijacked"), "a foreign update landed");
      }
    }),
    { numRuns: runs },
  );
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

  it("SQLite: no operation of one tenant reads the other's data", async () => {
    await runProperty(await open(createSqliteStore({ path: join(directory, "tenancy.db") })), 100);
  });

  it("PostgreSQL: no operation of one tenant reads the other's data", async () => {
    database = await createTestDatabase("tackle_memory_tenancy");
    await runProperty(await open(await createPostgresStore({ connectionString: database.url })), 60);
  });
});
