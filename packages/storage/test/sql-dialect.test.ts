/**
 * The dialect's fragments on the real databases: the same question asked of SQLite and PostgreSQL
 * through each dialect gets the same rows, for lists (empty ones too) and prefixes holding `%` and `_`.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import {
  checkTablePrefix,
  postgresDialect,
  type SqlDialect,
  StorageError,
  sqliteDialect,
} from "@tackle/storage";
import { createPostgresPool } from "@tackle/storage/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import type pg from "pg";

const names = ["ada", "a_a", "a%b", "abc", "b", "ab", "", "Ada"];

type Ask = (
  dialect: SqlDialect,
  where: (d: SqlDialect) => string,
  parameters: unknown[],
) => Promise<string[]>;

let database: TestDatabase;
let pool: pg.Pool;
let sqlite: DatabaseSync;

before(async () => {
  database = await createTestDatabase("tackle_dialect");
  pool = createPostgresPool({ connectionString: database.url, label: "dialect-test", max: 2 });
  await pool.query("CREATE TABLE names (name text PRIMARY KEY, n bigint NOT NULL)");
  sqlite = new DatabaseSync(":memory:");
  sqlite.exec("CREATE TABLE names (name TEXT PRIMARY KEY, n INTEGER NOT NULL)");
  for (const [index, name] of names.entries()) {
    await pool.query("INSERT INTO names VALUES ($1, $2)", [name, index]);
    sqlite.prepare("INSERT INTO names VALUES (?, ?)").run(name, index);
  }
});
after(async () => {
  sqlite?.close();
  await pool?.end();
  await database?.drop();
});

const ask: Ask = async (dialect, where, parameters) => {
  const sql = `SELECT name FROM names WHERE ${where(dialect)} ORDER BY name COLLATE ${dialect.name === "postgres" ? '"C"' : "BINARY"}`;
  if (dialect.name === "postgres")
    return (await pool.query<{ name: string }>(sql, parameters)).rows.map((row) => row.name);
  return (sqlite.prepare(sql).all(...(parameters as string[])) as { name: string }[]).map((row) => row.name);
};

/** Both databases answer, and agree, and the answer is `expected`. */
async function both(
  where: (d: SqlDialect) => string,
  parameters: (d: SqlDialect) => unknown[],
  expected: string[],
) {
  const fromSqlite = await ask(sqliteDialect, where, parameters(sqliteDialect));
  const fromPostgres = await ask(postgresDialect, where, parameters(postgresDialect));
  assert.deepEqual(fromSqlite, expected, "SQLite");
  assert.deepEqual(fromPostgres, expected, "PostgreSQL");
}

describe("one SQL dialect helper, two databases", () => {
  it("anyOf: the rows whose value is in the list, none for an empty list, any length in one statement", async () => {
    for (const list of [["ada", "b", "nobody"], [], ["a%b"], names]) {
      const expected = names.filter((name) => list.includes(name)).sort();
      await both(
        (d) => d.anyOf("name", 1),
        (d) => [d.list(list)],
        expected,
      );
    }
    // Numbers, with the array's element type named for PostgreSQL.
    await both(
      (d) => d.anyOf("n", 1, "bigint"),
      (d) => [d.list([0, 3])],
      ["abc", "ada"],
    );
  });

  it("startsWith: a literal prefix, `%` and `_` matching only themselves, the empty prefix everything", async () => {
    await both(
      (d) => d.startsWith("name", 1),
      () => ["a_"],
      ["a_a"],
    );
    await both(
      (d) => d.startsWith("name", 1),
      () => ["a%"],
      ["a%b"],
    );
    await both(
      (d) => d.startsWith("name", 1),
      () => ["ab"],
      ["ab", "abc"],
    );
    await both(
      (d) => d.startsWith("name", 1),
      () => [""],
      [...names].sort(),
    );
    // With another parameter after it: the numbering is the caller's.
    await both(
      (d) => `${d.startsWith("name", 1)} AND n > ${d.param(2)}`,
      () => ["a", 2],
      ["abc", "ab"].sort(),
    );
  });

  it("nowIso: ISO-8601 UTC with milliseconds from each database's clock, near this machine's", async () => {
    const fromPostgres = (await pool.query<{ now: string }>(`SELECT ${postgresDialect.nowIso} AS now`))
      .rows[0]?.now;
    const fromSqlite = (sqlite.prepare(`SELECT ${sqliteDialect.nowIso} AS now`).get() as { now: string }).now;
    for (const now of [fromPostgres, fromSqlite]) {
      assert.match(String(now), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(Math.abs(Date.parse(String(now)) - Date.now()) < 60_000, `${now} is now`);
    }
  });

  it("numbers parameters from 1, and refuses anything else", () => {
    assert.equal(postgresDialect.param(3), "$3");
    assert.equal(sqliteDialect.param(3), "?3");
    assert.throws(() => postgresDialect.param(0), RangeError);
    assert.throws(() => sqliteDialect.anyOf("name", 1.5), RangeError);
  });

  it("checkTablePrefix: plain lower-case identifiers pass; anything that could carry SQL is refused", () => {
    assert.equal(checkTablePrefix("durable_", "durable"), "durable_");
    for (const bad of ["", "Durable_", "1x", "x; DROP TABLE y", "x-y", "a".repeat(32), "x\u0000"]) {
      assert.throws(
        () => checkTablePrefix(bad, "durable"),
        (error: unknown) => StorageError.isInstance(error) && error.code === "invalid_option",
        JSON.stringify(bad),
      );
    }
  });
});
