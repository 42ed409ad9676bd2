/**
 * The scale benches' seeded document on PostgreSQL (`tasks.ts --store=postgres`): built once per size
 * into a database of its own by `scale-seed.ts` in a child process (as the SQLite file is), kept on the
 * server named by TACKLE_TEST_PG and marked complete by its comment; each run edits a copy made from
 * it as a template (`CREATE DATABASE … TEMPLATE`, a file copy on the server), dropped afterwards.
 */
import { testPostgresUrl } from "@tackle/test-support";
import pg from "pg";
import { postgresMigrations } from "../../packages/docscript/src/server/migrations.ts";
import { runSeed } from "./scale-harness.ts";

const seededMark = "tackle bench seed: complete";

function urlOf(database: string): string {
  const url = new URL(testPostgresUrl());
  url.pathname = `/${database}`;
  return url.toString();
}

async function withAdmin<T>(work: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: testPostgresUrl() });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

/**
 * The database holding the seeded document for `count` entities (seeded now if no complete one is
 * there: two benches at once seed it once, behind an advisory lock).
 */
export async function seededDatabase(count: number, overlayEvery: number | undefined): Promise<string> {
  const name = `tackle_bench_timeline_${count}_o${overlayEvery ?? 0}_s${postgresMigrations.at(-1)?.version}`;
  await withAdmin(async (admin) => {
    await admin.query("SELECT pg_advisory_lock(hashtext($1))", [name]);
    const found = await admin.query<{ mark: string | null }>(
      "SELECT shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE datname = $1",
      [name],
    );
    if (found.rows[0]?.mark === seededMark) return;
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
    const started = performance.now();
    const seeded = runSeed(count, urlOf(name), overlayEvery);
    await admin.query(`COMMENT ON DATABASE ${name} IS '${seededMark}'`);
    process.stderr.write(
      `${count}: seeded on PostgreSQL in ${Math.round((performance.now() - started) / 1000)} s: ${seeded}`,
    );
  });
  return name;
}

/** A fresh copy of `template` for one run: its URL, and how to drop it. */
export async function copyOf(
  template: string,
  name: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  await withAdmin(async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  });
  return {
    url: urlOf(name),
    drop: () =>
      withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}
