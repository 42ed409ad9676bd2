/**
 * ADR 0551 under concurrency on PostgreSQL: two stores (two pools, as two service processes) race
 * core-block saves and job enqueues of one tenant near its limit, round after round. Against an
 * oracle: what is held never passes the limit, equals what the accepted writes added, and a write is
 * refused only if it would not fit in what the round left. Without the tenant's counter-row lock
 * both racers count the same rows, both pass, and the limit is passed.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, it } from "node:test";
import { MemoryError, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

const databases: TestDatabase[] = [];
after(async () => {
  for (const database of databases) await database.drop();
});

/** A small deterministic generator, so a failing round can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  return (below: number) => {
    state = (Math.imul(state ^ (state >>> 15), 2_246_822_507) + 0x9e3779b9) >>> 0;
    return state % below;
  };
}

const unlimited = {
  memories: Infinity,
  memoryBytes: Infinity,
  events: Infinity,
  eventBytes: Infinity,
  documentBytes: Infinity,
  coreBlocks: Infinity,
  coreBlockBytes: Infinity,
  queuedJobs: Infinity,
};

const refused = (error: unknown) => {
  if (MemoryError.isInstance(error) && error.code === "quota_exceeded") return true;
  throw error;
};

async function withStores(
  body: (stores: MemoryStore[], query: (sql: string, p: unknown[]) => Promise<number>) => Promise<void>,
) {
  const database = await createTestDatabase("tackle_memory_held_races");
  databases.push(database);
  const stores = [
    await createPostgresStore({ connectionString: database.url }),
    await createPostgresStore({ connectionString: database.url }),
  ];
  const pool = new pg.Pool({ connectionString: database.url, max: 1 });
  const query = async (sql: string, parameters: unknown[]) =>
    Number((await pool.query(sql, parameters)).rows[0].n);
  try {
    await body(stores, query);
  } finally {
    await pool.end();
    for (const store of stores) await store.close();
  }
}

describe("held quotas under concurrency on PostgreSQL (ADR 0551)", () => {
  it("concurrent core-block saves never pass the tenant's bytes", async () => {
    await withStores(async (stores, query) => {
      const limit = 10_000;
      const limits = { ...unlimited, coreBlockBytes: limit };
      const next = random(551);
      const tenant = "blocks";
      const held = () =>
        query(
          "SELECT coalesce(sum(octet_length(value)), 0)::int AS n FROM memory_core_blocks WHERE tenant_id = $1",
          [tenant],
        );
      let refusals = 0;
      let purges = 0;
      for (let round = 0; round < 150; round += 1) {
        const before = await held();
        const sizes = Array.from({ length: 2 + next(5) }, () => 500 + next(3_000));
        const outcomes = await Promise.all(
          sizes.map((size, index) =>
            stores[index % 2]!.saveBlocks(
              tenant,
              { userId: `u${round}` },
              [
                {
                  block: {
                    label: `b${index}`,
                    value: "x".repeat(size),
                    limit: size,
                    version: 1,
                    updatedAt: new Date().toISOString(),
                  },
                  expectedVersion: 0,
                },
              ],
              limits,
            ).then(
              () => true,
              (error) => !refused(error),
            ),
          ),
        );
        const after = await held();
        const added = sizes.filter((_, index) => outcomes[index]).reduce((sum, size) => sum + size, 0);
        assert.ok(after <= limit, `round ${round}: ${after} bytes held, over ${limit}`);
        assert.equal(after, before + added, `round ${round}: held bytes`);
        for (const [index, size] of sizes.entries()) {
          if (outcomes[index]) continue;
          refusals += 1;
          assert.ok(after + size > limit, `round ${round}: ${size} refused with ${limit - after} free`);
        }
        // Room given back between rounds: a purge of an earlier scope.
        if (after > limit * 0.7) {
          await stores[0]!.purgeScope(tenant, { userId: `u${round - next(Math.min(round + 1, 4))}` });
          purges += 1;
        }
      }
      console.log(`core blocks: ${JSON.stringify({ rounds: 150, refusals, purges })}`);
      assert.ok(refusals > 0, "no round reached the limit");
    });
  });

  it("concurrent enqueues never pass the tenant's jobs waiting to run", async () => {
    await withStores(async (stores, query) => {
      const limit = 4;
      const limits = { ...unlimited, queuedJobs: limit };
      const next = random(552);
      const tenant = "jobs";
      const waiting = () =>
        query(
          "SELECT count(*)::int AS n FROM memory_jobs WHERE tenant_id = $1 AND status IN ('queued', 'running')",
          [tenant],
        );
      let refusals = 0;
      for (let round = 0; round < 200; round += 1) {
        const before = await waiting();
        const jobs = Array.from({ length: 2 + next(4) }, () => ({
          id: randomUUID(),
          tenantId: tenant,
          type: "import" as const,
          status: "queued" as const,
          userId: "q",
          input: { round },
          createdAt: new Date().toISOString(),
        }));
        const outcomes = await Promise.all(
          jobs.map((job, index) =>
            stores[index % 2]!.insertJob(job, limits).then(
              () => true,
              (error) => !refused(error),
            ),
          ),
        );
        const after = await waiting();
        const accepted = outcomes.filter(Boolean).length;
        assert.ok(after <= limit, `round ${round}: ${after} jobs waiting, over ${limit}`);
        assert.equal(after, before + accepted, `round ${round}: jobs waiting`);
        if (accepted < jobs.length) {
          refusals += jobs.length - accepted;
          assert.equal(after, limit, `round ${round}: refused with room`);
        }
        // Some of the waiting jobs finish, freeing their places.
        const queued = await stores[0]!.listJobs(tenant, {}, { limit: 100, status: "queued" });
        for (const job of queued.slice(0, next(queued.length + 1))) {
          await stores[0]!.updateJob({
            ...job,
            tenantId: tenant,
            status: "succeeded",
            finishedAt: new Date().toISOString(),
          });
        }
      }
      console.log(`queued jobs: ${JSON.stringify({ rounds: 200, refusals })}`);
      assert.ok(refusals > 0, "no round reached the limit");
    });
  });
});
