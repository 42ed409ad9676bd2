/** A scratch PostgreSQL database per suite on the server named by TACKLE_TEST_PG. */
import { randomBytes } from "node:crypto";
import pg from "pg";

export function testPostgresUrl(): string {
  return process.env.TACKLE_TEST_PG ?? "postgres://postgres@127.0.0.1:5432/test";
}

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  /** Drops the database (terminating its connections). */
  drop(): Promise<void>;
}

const installHint =
  "PostgreSQL is not reachable at TACKLE_TEST_PG. Install and start it: apt-get install -y postgresql && pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (or run scripts/ensure-services.sh)";

/** Creates an empty database for one suite, so suites running at once never see each other's tables. */
export async function createTestDatabase(prefix = "tackle"): Promise<TestDatabase> {
  const base = new URL(testPostgresUrl());
  const admin = new pg.Client({ connectionString: base.toString() });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`${installHint} (${(error as Error).message})`, { cause: error });
  }
  const name = `${prefix}_${randomBytes(6).toString("hex")}`.toLowerCase();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: base.toString() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
