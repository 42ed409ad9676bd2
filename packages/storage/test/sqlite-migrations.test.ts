/** SQLite: open policy, versioned migrations by user_version, refusal of newer and foreign files. */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import {
  isTransientDatabaseError,
  migrateSqlite,
  openMigratedSqlite,
  openSqlite,
  type SqliteMigration,
  StorageError,
  sqliteSchemaVersion,
  sqliteTransaction,
} from "@tackle/storage";

const directory = mkdtempSync(join(tmpdir(), "tackle-storage-sqlite-"));
after(() => rmSync(directory, { recursive: true, force: true }));

const notes: SqliteMigration[] = [
  {
    version: 1,
    name: "notes",
    up: "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
  },
  {
    version: 2,
    name: "notes.author",
    up: (database) => {
      database.exec("ALTER TABLE notes ADD COLUMN author TEXT NOT NULL DEFAULT 'unknown'");
    },
  },
];

const plain = (rows: readonly object[]) => rows.map((row) => ({ ...row }));

function rejectsWith(code: StorageError["code"]) {
  return (error: unknown) => {
    assert.ok(StorageError.isInstance(error), `expected a StorageError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return true;
  };
}

describe("openSqlite", () => {
  it("creates the folder, switches to WAL and applies the synchronous level and busy timeout", () => {
    const path = join(directory, "nested", "deeper", "open.db");
    const database = openSqlite({ path, synchronous: "normal", busyTimeoutMs: 1234 });
    try {
      assert.equal(
        (database.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
        "wal",
      );
      assert.equal((database.prepare("PRAGMA synchronous").get() as { synchronous: number }).synchronous, 1);
      assert.equal((database.prepare("PRAGMA busy_timeout").get() as { timeout: number }).timeout, 1234);
    } finally {
      database.close();
    }
    const full = openSqlite({ path });
    assert.equal((full.prepare("PRAGMA synchronous").get() as { synchronous: number }).synchronous, 2);
    full.close();
  });

  it("refuses a bad option with a typed error", () => {
    assert.throws(() => openSqlite({ path: "" }), rejectsWith("invalid_option"));
    assert.throws(
      () => openSqlite({ path: join(directory, "x.db"), synchronous: "sometimes" as "full" }),
      rejectsWith("invalid_option"),
    );
  });

  it("names the file when it is not a SQLite database", () => {
    const path = join(directory, "not-a-database.db");
    writeFileSync(path, "this is not a SQLite file, just some text long enough to fill a header");
    assert.throws(
      () => openSqlite({ path }),
      (error: unknown) =>
        StorageError.isInstance(error) &&
        error.code === "unreadable_database" &&
        error.message.includes(path) &&
        error.message.includes("file is not a database"),
    );
  });

  it("sqliteTransaction commits, rolls back on a throw, and nests as a savepoint", () => {
    const database = openSqlite({ path: ":memory:" });
    database.exec("CREATE TABLE t (v INTEGER)");
    sqliteTransaction(database, () => database.exec("INSERT INTO t VALUES (1)"));
    assert.throws(() =>
      sqliteTransaction(database, () => {
        database.exec("INSERT INTO t VALUES (2)");
        throw new Error("boom");
      }),
    );
    sqliteTransaction(database, () => {
      database.exec("INSERT INTO t VALUES (3)");
      assert.throws(() =>
        sqliteTransaction(database, () => {
          database.exec("INSERT INTO t VALUES (4)");
          throw new Error("inner");
        }),
      );
    });
    assert.deepEqual(
      (database.prepare("SELECT v FROM t ORDER BY v").all() as { v: number }[]).map((row) => row.v),
      [1, 3],
    );
    database.close();
  });
});

describe("migrateSqlite", () => {
  it("migrates a new file to the newest version, and a second open changes nothing", () => {
    const path = join(directory, "fresh.db");
    const database = openSqlite({ path });
    assert.deepEqual(migrateSqlite(database, { store: "notes", migrations: notes }), { from: 0, to: 2 });
    database.exec("INSERT INTO notes (body) VALUES ('kept')");
    database.close();
    const again = openMigratedSqlite({ path, store: "notes", migrations: notes });
    assert.equal(sqliteSchemaVersion(again), 2);
    assert.deepEqual(plain(again.prepare("SELECT body, author FROM notes").all()), [
      { body: "kept", author: "unknown" },
    ]);
    again.close();
  });

  it("upgrades a file left at version 1, keeping its rows", () => {
    const path = join(directory, "v1.db");
    const old = openMigratedSqlite({ path, store: "notes", migrations: notes.slice(0, 1) });
    old.exec("INSERT INTO notes (body) VALUES ('one'), ('two')");
    old.close();
    const database = openSqlite({ path });
    assert.deepEqual(migrateSqlite(database, { store: "notes", migrations: notes }), { from: 1, to: 2 });
    assert.deepEqual(plain(database.prepare("SELECT body FROM notes ORDER BY id").all()), [
      { body: "one" },
      { body: "two" },
    ]);
    database.close();
  });

  it("refuses a file whose schema is newer than the code, and leaves it untouched", () => {
    const path = join(directory, "newer.db");
    const newer = openMigratedSqlite({
      path,
      store: "notes",
      migrations: [...notes, { version: 3, name: "future", up: "CREATE TABLE future (x INTEGER)" }],
    });
    newer.exec("INSERT INTO notes (body) VALUES ('from the future')");
    newer.close();
    assert.throws(
      () => openMigratedSqlite({ path, store: "notes", migrations: notes }),
      (error: unknown) => {
        rejectsWith("schema_too_new")(error);
        assert.deepEqual((error as StorageError).details, { store: "notes", found: 3, supported: 2 });
        return true;
      },
    );
    const check = new DatabaseSync(path);
    assert.equal(sqliteSchemaVersion(check), 3);
    assert.equal((check.prepare("SELECT count(*) AS n FROM notes").get() as { n: number }).n, 1);
    check.close();
  });

  it("rolls a failing migration back whole: the file stays at the previous version", () => {
    const path = join(directory, "failing.db");
    openMigratedSqlite({ path, store: "notes", migrations: notes.slice(0, 1) }).close();
    const broken: SqliteMigration[] = [
      notes[0] as SqliteMigration,
      { version: 2, name: "half", up: "CREATE TABLE half (x INTEGER); INSERT INTO nowhere VALUES (1);" },
    ];
    assert.throws(
      () => openMigratedSqlite({ path, store: "notes", migrations: broken }),
      rejectsWith("migration_failed"),
    );
    const check = new DatabaseSync(path);
    assert.equal(sqliteSchemaVersion(check), 1);
    assert.equal(check.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").get(), undefined);
    check.close();
  });

  it("refuses another store's file", () => {
    const path = join(directory, "foreign.db");
    openMigratedSqlite({ path, store: "notes", migrations: notes }).close();
    assert.throws(
      () => openMigratedSqlite({ path, store: "other", migrations: notes }),
      rejectsWith("foreign_database"),
    );
  });

  it("refuses a migration list that is not numbered 1, 2, 3, …", () => {
    const database = openSqlite({ path: ":memory:" });
    assert.throws(
      () => migrateSqlite(database, { store: "notes", migrations: [notes[1] as SqliteMigration] }),
      rejectsWith("invalid_migrations"),
    );
    database.close();
  });
});

describe("another connection holding the SQLite file's write lock (ADR 0565)", () => {
  it("an open of a file not yet in WAL waits its busy timeout, then fails lock_timeout (transient), not unreadable", () => {
    const path = join(directory, "locked-new.db");
    writeFileSync(path, "");
    // Another connection writing the file in rollback-journal mode (a process that has not switched it
    // to WAL yet): SQLite answers the switch busy at once, without waiting the busy timeout.
    const writer = new DatabaseSync(path);
    writer.exec("CREATE TABLE kept (v INTEGER); BEGIN IMMEDIATE; INSERT INTO kept VALUES (1)");
    try {
      const started = performance.now();
      assert.throws(
        () => openMigratedSqlite({ path, store: "notes", migrations: notes, busyTimeoutMs: 250 }),
        (error: unknown) => {
          // Before: `unreadable_database` ("move it aside") at once, for a file with nothing wrong.
          rejectsWith("lock_timeout")(error);
          assert.ok(isTransientDatabaseError(error), "a retry can mend it");
          return true;
        },
      );
      const waited = performance.now() - started;
      assert.ok(waited >= 250, `it waited the busy timeout, not ${Math.round(waited)} ms`);
      writer.exec("COMMIT");
    } finally {
      writer.close();
    }
    const database = openMigratedSqlite({ path, store: "notes", migrations: notes });
    assert.equal(sqliteSchemaVersion(database), 2, "once the lock is gone the open migrates");
    database.close();
  });

  it("a migration waits its busy timeout for the write lock, then fails lock_timeout (transient); the version is unchanged", () => {
    const path = join(directory, "locked-wal.db");
    openMigratedSqlite({ path, store: "notes", migrations: notes.slice(0, 1) }).close();
    const writer = openSqlite({ path });
    writer.exec("BEGIN IMMEDIATE; INSERT INTO notes (body) VALUES ('held')");
    try {
      const started = performance.now();
      assert.throws(
        () => openMigratedSqlite({ path, store: "notes", migrations: notes, busyTimeoutMs: 200 }),
        (error: unknown) => {
          // Before: SQLite's own "database is locked", no StorageError.
          rejectsWith("lock_timeout")(error);
          assert.deepEqual((error as StorageError).details, { store: "notes", supported: 2 });
          assert.ok(isTransientDatabaseError(error), "a retry can mend it");
          return true;
        },
      );
      assert.ok(performance.now() - started >= 200, "it waited the busy timeout");
    } finally {
      writer.exec("ROLLBACK");
      writer.close();
    }
    const check = new DatabaseSync(path);
    assert.equal(sqliteSchemaVersion(check), 1, "the version is unchanged");
    check.close();
  });

  it("sqliteTransaction waits its busy timeout, then fails lock_timeout (transient); work never runs", () => {
    const path = join(directory, "locked-transaction.db");
    openMigratedSqlite({ path, store: "notes", migrations: notes }).close();
    const writer = openSqlite({ path });
    const waiting = openSqlite({ path, busyTimeoutMs: 150 });
    writer.exec("BEGIN IMMEDIATE; INSERT INTO notes (body) VALUES ('held')");
    let ran = false;
    try {
      const started = performance.now();
      assert.throws(
        () =>
          sqliteTransaction(waiting, () => {
            ran = true;
          }),
        (error: unknown) => {
          // Before: SQLite's own "database is locked", no StorageError.
          rejectsWith("lock_timeout")(error);
          assert.match((error as Error).message, /150 ms/);
          assert.ok(isTransientDatabaseError(error), "a retry can mend it");
          return true;
        },
      );
      assert.ok(performance.now() - started >= 150, "it waited the busy timeout");
      assert.equal(ran, false, "work did not run");
      assert.equal(waiting.isTransaction, false, "no transaction is left open");
    } finally {
      writer.exec("ROLLBACK");
      writer.close();
    }
    sqliteTransaction(waiting, () => waiting.exec("INSERT INTO notes (body) VALUES ('after')"));
    assert.deepEqual(plain(waiting.prepare("SELECT body FROM notes").all()), [{ body: "after" }]);
    waiting.close();
  });
});

describe("a new SQLite store is its owner's alone", () => {
  it("creates its folders 0700 and the file, its WAL and shared memory 0600, whatever the umask; an existing file keeps its mode", () => {
    const mode = (path: string) => statSync(path).mode & 0o777;
    const previous = process.umask(0o022);
    try {
      const path = join(directory, "private", "nested", "store.sqlite");
      const database = openSqlite({ path });
      database.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('a secret of mine')");
      // Before, with the usual umask, the folder was 0755 and the file 0644: any user could read it.
      assert.equal(mode(join(directory, "private")), 0o700);
      assert.equal(mode(join(directory, "private", "nested")), 0o700);
      for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(mode(file), 0o600, file);
      database.close();
      const shared = join(directory, "shared.sqlite");
      writeFileSync(shared, "");
      chmodSync(shared, 0o640);
      openSqlite({ path: shared }).close();
      assert.equal(mode(shared), 0o640, "a file the owner made keeps the mode they gave it");
    } finally {
      process.umask(previous);
    }
  });
});
