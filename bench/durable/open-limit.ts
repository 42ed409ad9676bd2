/**
 * What the per-tenant bound on open runs (ADR 0123, `maxOpenRuns`) costs a tenant's starts: runs that
 * pause at an approval (each one open), started by one tenant with 32 in flight, with the bound counted
 * in each start's transaction (the tenant's counter raised and checked, ADR 0127) against the same
 * starts without it, beside the tenant's runs already open under the bound (0, then `open` paused before
 * the measure). On SQLite (a file) and PostgreSQL (the counter's row serialises a tenant's starts), in
 * the same run.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/durable/open-limit.ts [starts] [open]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGraph, createRunner, type DurableStore, type OpenLimit } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase } from "@tackle/test-support";

const starts = Number(process.argv[2] ?? 1000);
const open = Number(process.argv[3] ?? 9000);
const inFlight = 32;
const directory = mkdtempSync(join(tmpdir(), "durable-open-limit-"));

/** A user's run that waits for a person: one node, one approval. */
const graph = createGraph<{ amount: number }>("refund").node("ask", async (state, ctx) => {
  await ctx.interrupt({ kind: "approval", amount: state.amount });
  return state;
});

/** Starts `count` runs on threads `<threads>-<n>`, `inFlight` at once; the starts per second. */
async function startRuns(
  store: DurableStore,
  threads: string,
  count: number,
  limit: OpenLimit | undefined,
): Promise<number> {
  const runner = createRunner({ store, graphs: [graph] });
  let next = 0;
  const began = performance.now();
  const worker = async () => {
    while (next < count) {
      const index = next++;
      const snapshot = await runner.start(
        graph,
        { amount: index },
        { threadId: `${threads}-${index}`, ...(limit === undefined ? {} : { openLimit: limit }) },
      );
      if (snapshot.status !== "paused") throw new Error(`run ${index} ended ${snapshot.status}`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - began) / 1000;
  await runner.close();
  return count / seconds;
}

interface Row {
  readonly store: string;
  readonly already: number;
  readonly plain: number;
  readonly bounded: number;
}

const rounds = 3;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] as number;

/** On one store: the tenant's `already` runs opened, then batches with and without the bound, alternating. */
async function measure(name: string, open: () => Promise<DurableStore>, already: number): Promise<Row> {
  const store = await open();
  const limit = { prefix: "tenant/", max: already + 2 * rounds * starts };
  // The tenant's runs already open (not measured), started under the bound as `createDurableApp`
  // starts every run, so they hold their places in the tenant's counter (ADR 0127).
  if (already > 0) await startRuns(store, "tenant/open", already, limit);
  const plain: number[] = [];
  const bounded: number[] = [];
  for (let round = 0; round < rounds; round++) {
    plain.push(await startRuns(store, `tenant/plain-${round}`, starts, undefined));
    bounded.push(await startRuns(store, `tenant/bounded-${round}`, starts, limit));
  }
  await store.close();
  return { store: name, already, plain: median(plain), bounded: median(bounded) };
}

const rows: Row[] = [];
let files = 0;
const sqlite = async () => createSqliteStore({ path: join(directory, `runs-${++files}.sqlite`) });
const databases: Awaited<ReturnType<typeof createTestDatabase>>[] = [];
const postgres = async () => {
  const database = await createTestDatabase("durable_open_limit");
  databases.push(database);
  return createPostgresStore({ connectionString: database.url });
};
for (const already of [0, open]) {
  rows.push(await measure("SQLite (file)", sqlite, already));
  rows.push(await measure("PostgreSQL", postgres, already));
}
for (const database of databases) await database.drop();
rmSync(directory, { recursive: true, force: true });

console.log(
  `\n${starts} starts of runs that pause at an approval, one tenant, ${inFlight} in flight; median of ${rounds} alternating batches (Node ${process.version})\n`,
);
console.log(
  "| store | tenant's runs already open | starts/s, no bound | starts/s, bound counted | bounded / plain |",
);
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  console.log(
    `| ${row.store} | ${row.already} | ${row.plain.toFixed(0)} | ${row.bounded.toFixed(0)} | ${(row.bounded / row.plain).toFixed(2)} |`,
  );
}
