/**
 * A scope's snapshot caught up from the rows changed since its stamp (ADR 0541) as a property against
 * an oracle, on each store: random interleavings of adds, batches, edits, deletes, status changes
 * (reactivations too), moves to another scope, purges, conversation events and imports — written by
 * two stores on one database, and on PostgreSQL also by bare transactions that take no lock but the
 * trigger's, several at once with searches in flight — must leave every cached snapshot answering
 * exactly what a snapshot read anew answers: the same memories in write order, the same hits with the
 * same scores to the last bit, the same neighbouring turns. A small bound makes scopes cross it.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the rounds (default 400 on a SQLite file, 150 on PostgreSQL), from
 * seed `TACKLE_PROPERTY_SEED` (default 41).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import type { MemoryScope } from "../src/scope/memory-scope.ts";
import { createMemoryService } from "../src/service/create-memory-service.ts";
import type { MemoryService } from "../src/service/memory-service.ts";
import {
  createScopeSnapshots,
  type ScopeSnapshot,
  searchSnapshot,
  snapshotMemories,
  snapshotNeighbours,
} from "../src/service/scope-snapshot.ts";
import type { MemoryStore } from "../src/store/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/create-postgres-store.ts";
import { createSqliteStore } from "../src/store/sqlite/create-sqlite-store.ts";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 41);
const tenantId = "acme";
const words = [
  "kayak",
  "lake",
  "red",
  "canoe",
  "trailer",
  "tea",
  "lisbon",
  "river",
  "blue",
  "paddle",
  "boat",
  "morning",
];
const users = ["ann", "bob"];
const sessions = [undefined, "s1", "s2"];
const scopes: MemoryScope[] = [
  { userId: "ann" },
  { userId: "ann", sessionId: "s1" },
  { userId: "bob" },
  { userId: "ann", sessionId: "s2" },
];
const queries: { terms: string[]; kinds?: ("episode" | "fact")[] }[] = [
  { terms: ["kayak"] },
  { terms: ["red", "lake", "tea"] },
  { terms: ["pad*", "boat"] },
  { terms: ["river", "morning"], kinds: ["episode"] },
  { terms: ["lisbon", "blue", "canoe"], kinds: ["fact"] },
];

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-snapshot-changes-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

interface Backend {
  readonly name: string;
  readonly rounds: number;
  open(): Promise<{ first: MemoryStore; second: MemoryStore; bare?: pg.Pool }>;
}

const backends: Backend[] = [
  {
    name: "SQLite",
    rounds: rounds(400),
    open: async () => {
      const path = join(directory, "changes.db");
      return { first: createSqliteStore({ path }), second: createSqliteStore({ path }) };
    },
  },
  {
    name: "PostgreSQL",
    rounds: rounds(150),
    open: async () => {
      const database = await createTestDatabase("tackle_memory_snapshot_changes");
      databases.push(database);
      return {
        first: await createPostgresStore({ connectionString: database.url }),
        second: await createPostgresStore({ connectionString: database.url }),
        bare: new pg.Pool({ connectionString: database.url, max: 4 }),
      };
    },
  },
];

interface World {
  readonly random: () => number;
  readonly services: readonly MemoryService[];
  readonly stores: readonly MemoryStore[];
  readonly bare: pg.Pool | undefined;
  readonly counters: Record<string, number>;
}

const pick = <T>(random: () => number, values: readonly T[]): T =>
  values[Math.floor(random() * values.length)]!;
const sentence = (random: () => number) =>
  Array.from({ length: 2 + Math.floor(random() * 6) }, () => pick(random, words)).join(" ");
const someScope = (random: () => number) => {
  const sessionId = pick(random, sessions);
  return { userId: pick(random, users), ...(sessionId === undefined ? {} : { sessionId }) };
};

/** Some memory of the tenant (any status), or undefined before the first. */
async function someMemory(world: World) {
  const store = pick(world.random, world.stores);
  const listed = await store.listMemories(
    tenantId,
    { userId: pick(world.random, users) },
    { limit: 200, order: "written" },
  );
  return listed.length === 0 ? undefined : pick(world.random, listed);
}

/** Errors a racing write may answer (an edit of a memory deleted or changed meanwhile). */
function tolerated(error: unknown): void {
  const code = (error as { code?: string }).code;
  if (code === "conflict" || code === "not_found") return;
  throw error;
}

/** One random write, through a service, a store, or (PostgreSQL) a bare transaction. */
async function write(world: World): Promise<void> {
  const { random, counters } = world;
  const service = pick(random, world.services);
  const roll = random();
  const count = (name: string) => {
    counters[name] = (counters[name] ?? 0) + 1;
  };
  if (roll < 0.3) {
    count("add");
    const kind = random() < 0.7 ? "episode" : "fact";
    await service.add(tenantId, { ...someScope(random), kind, content: sentence(random) });
  } else if (roll < 0.38) {
    count("batch");
    const memories = Array.from({ length: 1 + Math.floor(random() * 5) }, () => ({
      kind: "episode" as const,
      content: sentence(random),
    }));
    await service.addBatch(tenantId, { ...someScope(random), memories });
  } else if (roll < 0.5) {
    const memory = await someMemory(world);
    if (memory === undefined) return;
    count("edit");
    await service.updateMemory(tenantId, memory.id, { content: sentence(random) }).catch(tolerated);
  } else if (roll < 0.57) {
    const memory = await someMemory(world);
    if (memory === undefined) return;
    count("delete");
    await service.deleteMemory(tenantId, memory.id, { reason: "property" }).catch(tolerated);
  } else if (roll < 0.7) {
    // A status change as consolidation and supersession make it, a reactivation too, or a move.
    const memory = await someMemory(world);
    if (memory === undefined) return;
    const move = random() < 0.25;
    count(move ? "move" : "status");
    const { userId: _user, sessionId: _session, ...unscoped } = memory;
    const next = move
      ? { ...unscoped, ...someScope(random), version: memory.version + 1 }
      : {
          ...memory,
          status: pick(random, ["active", "superseded", "archived"] as const),
          version: memory.version + 1,
        };
    await pick(random, world.stores).updateMemory(tenantId, next, memory.version, { change: "update" });
  } else if (roll < 0.74) {
    count("purge");
    await service.purge(tenantId, { userId: pick(random, users), sessionId: pick(random, ["s1", "s2"]) });
  } else if (roll < 0.82) {
    count("event");
    await service.writeEvent(tenantId, {
      ...someScope(random),
      sessionId: pick(random, ["s1", "s2"]),
      role: random() < 0.6 ? "user" : "assistant",
      content: `I like the ${sentence(random)}`,
    });
  } else if (roll < 0.85) {
    count("import");
    const messages = Array.from({ length: 2 + Math.floor(random() * 4) }, (_, index) => ({
      role: index % 2 === 0 ? ("user" as const) : ("assistant" as const),
      content: `I keep a ${sentence(random)}`,
    }));
    const { job } = await service.importConversations(tenantId, {
      userId: pick(random, users),
      sessionId: pick(random, ["s1", "s2"]),
      format: "openai",
      conversations: [{ messages }],
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { job: now } = await service.getJob(tenantId, job.id);
      if (now.status === "succeeded") break;
      assert.notEqual(now.status, "failed", JSON.stringify(now.error));
      assert.ok(Date.now() < deadline, "the import did not finish in 30 s");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } else if (world.bare !== undefined) {
    await bareWrite(world, world.bare);
  } else {
    count("add");
    await service.add(tenantId, { ...someScope(random), content: sentence(random) });
  }
}

/**
 * A transaction that takes no lock of the store's own (not the tenant's usage row): only the
 * trigger's. It holds the generation row a moment before it commits, so others wait behind it.
 */
async function bareWrite(world: World, bare: pg.Pool): Promise<void> {
  const memory = await someMemory(world);
  if (memory === undefined) return;
  const client = await bare.connect();
  try {
    await client.query("BEGIN");
    if (world.random() < 0.5) {
      world.counters.bareEdit = (world.counters.bareEdit ?? 0) + 1;
      await client.query("UPDATE memory_memories SET content = $2 WHERE tenant_id = $1 AND id = $3", [
        tenantId,
        sentence(world.random),
        memory.id,
      ]);
    } else {
      world.counters.bareInsert = (world.counters.bareInsert ?? 0) + 1;
      const id = `bare-${Math.floor(world.random() * 1e12)}`;
      await client.query(
        `INSERT INTO memory_memories (id, tenant_id, user_id, agent_id, session_id, scope_key, kind, content, dedupe_key,
           metadata, provenance, version, status, importance, helpful, unhelpful, successes, failures, access_count,
           created_at, updated_at)
         SELECT $2, tenant_id, user_id, agent_id, session_id, scope_key, kind, $3, $2, metadata, provenance, 1,
           'active', importance, 0, 0, 0, 0, 0, created_at, updated_at
         FROM memory_memories WHERE tenant_id = $1 AND id = $4`,
        [tenantId, id, sentence(world.random), memory.id],
      );
    }
    await client.query("SELECT pg_sleep($1)", [world.random() * 0.01]);
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    client.release();
  }
}

/** What a snapshot answers, in a form compared exactly. */
function answers(snapshot: ScopeSnapshot | undefined) {
  if (snapshot === undefined) return undefined;
  const memories = snapshotMemories(snapshot);
  const ids = memories.map((memory) => memory.id);
  return {
    memories: memories.map((memory) => `${memory.id} ${memory.kind} ${memory.status} ${memory.content}`),
    searches: queries.map((query) =>
      searchSnapshot(snapshot, query.terms, {
        limit: 20,
        ...(query.kinds ? { kinds: query.kinds } : {}),
      }).map((hit) => [hit.memory.id, hit.score]),
    ),
    neighbours: [...snapshotNeighbours(snapshot, ids, 2)].map(([id, around]) => [
      id,
      around.map(({ memory, offset }) => `${offset} ${memory.id}`),
    ]),
  };
}

describe("PostgreSQL: a writer that waits for another's commit stamps after it", () => {
  it("a row committed after a reader's stamp is never stamped at or below it", async () => {
    const database = await createTestDatabase("tackle_memory_snapshot_order");
    databases.push(database);
    const store = await createPostgresStore({ connectionString: database.url });
    const service = createMemoryService({ store });
    const bare = new pg.Pool({ connectionString: database.url, max: 2 });
    const [first, second] = [await bare.connect(), await bare.connect()];
    try {
      const ids: string[] = [];
      for (const content of ["Ann: kayak one", "Ann: kayak two", "Ann: kayak three"]) {
        ids.push((await service.add(tenantId, { userId: "ann", kind: "episode", content })).memory.id);
      }
      const snapshots = createScopeSnapshots(store);
      const check = async (label: string) =>
        assert.deepEqual(
          answers(await snapshots.get(tenantId, { userId: "ann" })),
          answers(await createScopeSnapshots(store).get(tenantId, { userId: "ann" })),
          label,
        );
      await check("loaded");
      const edit = (client: pg.PoolClient, index: number, content: string) =>
        client.query("UPDATE memory_memories SET content = $2 WHERE tenant_id = $1 AND id = $3", [
          tenantId,
          content,
          ids[index],
        ]);
      // The first transaction writes, the second writes while it is open, the first writes again
      // and commits, a search catches up, then the second commits: its row must be found next
      // (were its stamp drawn before it waited, it would sit below the stamp the search holds).
      await first.query("BEGIN");
      await edit(first, 0, "Ann: paddle one");
      await second.query("BEGIN");
      const waiting = edit(second, 1, "Ann: paddle two");
      await new Promise((resolve) => setTimeout(resolve, 100));
      await edit(first, 2, "Ann: paddle three");
      await first.query("COMMIT");
      await check("after the first commit");
      await waiting;
      await second.query("COMMIT");
      // Another write moves the tenant's stamp past both before the next search.
      await service.add(tenantId, { userId: "bob", content: "Bob: a kayak too" });
      await check("after the second commit");
      const found = searchSnapshot((await snapshots.get(tenantId, { userId: "ann" }))!, ["paddle"], {
        limit: 5,
      });
      assert.equal(found.length, 3, "the three edits are found");
    } finally {
      first.release();
      second.release();
      await bare.end();
      await service.close();
    }
  });
});

for (const backend of backends) {
  describe(`${backend.name}: a snapshot caught up from the changes equals one read anew`, () => {
    it(`over ${backend.rounds} rounds of random writes`, { timeout: 600_000 }, async () => {
      const { first, second, bare } = await backend.open();
      const services = [createMemoryService({ store: first }), createMemoryService({ store: second })];
      const world: World = {
        random: seededRandom(seed),
        services,
        stores: [first, second],
        bare,
        counters: {},
      };
      const cached = [
        createScopeSnapshots(first, { maximumScope: 30 }),
        createScopeSnapshots(second, { maximumScope: 1_000, maximumCached: 60 }),
      ];
      let compared = 0;
      let held = 0;
      try {
        for (let round = 0; round < backend.rounds; round += 1) {
          // Writes at once with searches in flight on PostgreSQL (a snapshot may read a stamp mid-way),
          // one after another with a search between on SQLite (one writer at a time).
          const writers = 1 + Math.floor(world.random() * 3);
          if (bare === undefined) {
            for (let writer = 0; writer < writers; writer += 1) {
              await write(world);
              await pick(world.random, cached).get(tenantId, pick(world.random, scopes));
            }
          } else {
            const writes = Array.from({ length: writers }, () => write(world));
            const inFlight = scopes.map((scope) => pick(world.random, cached).get(tenantId, scope));
            await Promise.all([...writes, ...inFlight]);
          }
          for (const scope of scopes) {
            for (const [index, snapshots] of cached.entries()) {
              const bound = index === 0 ? 30 : 1_000;
              const fresh = await createScopeSnapshots(pick(world.random, world.stores), {
                maximumScope: bound,
              }).get(tenantId, scope);
              const kept = await snapshots.get(tenantId, scope);
              assert.deepEqual(
                answers(kept),
                answers(fresh),
                `round ${round}, ${JSON.stringify(scope)}, bound ${bound}`,
              );
              compared += 1;
              if (kept !== undefined) held += 1;
            }
          }
        }
      } finally {
        for (const service of services) await service.close();
        await bare?.end();
      }
      // The plan reached every kind of write, and the snapshots were in process most of the time.
      const expected = ["add", "batch", "edit", "delete", "status", "move", "purge", "event", "import"];
      if (bare !== undefined) expected.push("bareEdit", "bareInsert");
      for (const name of expected) assert.ok((world.counters[name] ?? 0) > 0, `no ${name} in the plan`);
      assert.ok(held > compared / 3, `snapshots held ${held} of ${compared}`);
    });
  });
}
