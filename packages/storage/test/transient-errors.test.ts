/** `isTransientDatabaseError` on the errors real drivers throw: a lost or refused connection, busy SQLite, and not the rest. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { isTransientDatabaseError } from "@tackle/storage";
import { createTestDatabase, freePort, testPostgresUrl } from "@tackle/test-support";
import pg from "pg";

/** The error `run` throws, or a failure of the test when it throws none. */
async function thrown(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  assert.fail("expected an error");
}

describe("PostgreSQL", () => {
  it("a session the server terminates (a restart, a failover) is transient", async () => {
    const victim = new pg.Client({
      connectionString: testPostgresUrl(),
      application_name: "transient-victim",
    });
    victim.on("error", () => {});
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    const admin = new pg.Client({ connectionString: testPostgresUrl() });
    await admin.connect();
    try {
      // Terminated mid-statement, as a server shutting down terminates every session.
      const running = thrown(() => victim.query("SELECT pg_sleep(30)"));
      for (let tries = 0; tries < 100; tries++) {
        const active = await admin.query(
          "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
          [pid],
        );
        if (active.rowCount === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      const error = await running;
      assert.equal((error as { code?: string }).code, "57P01", String(error));
      assert.equal(isTransientDatabaseError(error), true);
      // And the next query on the dead connection, which pg answers without a code.
      const after = await thrown(() => victim.query("SELECT 1"));
      assert.equal(isTransientDatabaseError(after), true, String(after));
    } finally {
      await admin.end();
      await victim.end().catch(() => {});
    }
  });

  it("a connection refused (the server down) is transient, alone or as a cause", async () => {
    const port = await freePort();
    const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/test` });
    try {
      const error = await thrown(() => pool.query("SELECT 1"));
      assert.equal(isTransientDatabaseError(error), true, String(error));
      const wrapped = new Error("could not store the job", { cause: error });
      assert.equal(isTransientDatabaseError(wrapped), true);
    } finally {
      await pool.end();
    }
  });

  it("pg's own query deadline on a pool this package did not open is transient", async () => {
    const pool = new pg.Pool({ connectionString: testPostgresUrl(), query_timeout: 50, max: 1 });
    try {
      const error = await thrown(() => pool.query("SELECT pg_sleep(1)"));
      assert.match(String(error), /Query read timeout/);
      assert.equal(isTransientDatabaseError(error), true);
    } finally {
      await pool.end();
    }
  });

  it("what fails the same way again is not transient: a constraint, bad SQL, a statement timeout", async () => {
    const database = await createTestDatabase("tackle_transient");
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query("CREATE TABLE t (id int PRIMARY KEY)");
      await client.query("INSERT INTO t VALUES (1)");
      const duplicate = await thrown(() => client.query("INSERT INTO t VALUES (1)"));
      assert.equal((duplicate as { code?: string }).code, "23505");
      const syntax = await thrown(() => client.query("SELEC 1"));
      await client.query("SET statement_timeout = 10");
      const timeout = await thrown(() => client.query("SELECT pg_sleep(1)"));
      assert.equal((timeout as { code?: string }).code, "57014");
      for (const error of [duplicate, syntax, timeout]) assert.equal(isTransientDatabaseError(error), false);
    } finally {
      await client.end();
      await database.drop();
    }
  });
});

describe("SQLite", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-transient-"));
  after(() => rmSync(directory, { recursive: true, force: true }));

  it("a write while another connection holds the write lock (busy) is transient; a constraint is not", () => {
    const path = join(directory, "busy.db");
    const holder = new DatabaseSync(path);
    const other = new DatabaseSync(path, { timeout: 0 });
    try {
      holder.exec("CREATE TABLE t (id INTEGER PRIMARY KEY)");
      holder.exec("BEGIN IMMEDIATE");
      holder.exec("INSERT INTO t VALUES (1)");
      let busy: unknown;
      try {
        other.exec("INSERT INTO t VALUES (2)");
      } catch (error) {
        busy = error;
      }
      assert.match(String(busy), /locked|busy/i);
      assert.equal(isTransientDatabaseError(busy), true);
      holder.exec("COMMIT");
      let duplicate: unknown;
      try {
        other.exec("INSERT INTO t VALUES (1)");
      } catch (error) {
        duplicate = error;
      }
      assert.match(String(duplicate), /UNIQUE/);
      assert.equal(isTransientDatabaseError(duplicate), false);
    } finally {
      holder.close();
      other.close();
    }
  });
});

describe("inputs that are not errors", () => {
  it("answers false, and stops on a cause that points back at itself", () => {
    for (const value of [undefined, null, 42, "ECONNRESET", { code: 57 }]) {
      assert.equal(isTransientDatabaseError(value), false);
    }
    const looped = new Error("outer") as Error & { cause?: unknown };
    looped.cause = looped;
    assert.equal(isTransientDatabaseError(looped), false);
  });
});
