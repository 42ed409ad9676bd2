/**
 * The two stores the metadata quota is checked on (ADR 0556): a SQLite file and PostgreSQL, each
 * with a way to read rows from outside the service and to step the schema back before the migration
 * that counts metadata, as a store made before it.
 */
import { DatabaseSync } from "node:sqlite";
import { createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

export interface MetadataSubject {
  readonly name: string;
  open(): Promise<MemoryStore>;
  /** Rows of a query run from outside the service (`?` marks, numbered for PostgreSQL). */
  rows(sql: string, parameters: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /** Drops what ADR 0556's migration added and steps the schema back before it. */
  before0556(): Promise<void>;
  /**
   * Charges each row holding `{}` 2 bytes, as writes did before ADR 0559, and steps the schema back
   * before the migration that stopped it.
   */
  before0559(): Promise<void>;
  close(): Promise<void>;
}

export function sqliteMetadataSubject(path: string): MetadataSubject {
  const withDatabase = <T>(body: (database: DatabaseSync) => T): T => {
    const database = new DatabaseSync(path);
    try {
      return body(database);
    } finally {
      database.close();
    }
  };
  return {
    name: "SQLite file",
    open: async () => createSqliteStore({ path }),
    rows: async (sql, parameters) =>
      withDatabase((database) => database.prepare(sql).all(...(parameters as never[])) as never),
    before0556: async () =>
      withDatabase((database) =>
        database.exec(
          "ALTER TABLE memory_tenant_usage DROP COLUMN metadata_bytes; PRAGMA user_version = 11;",
        ),
      ),
    before0559: async () =>
      withDatabase((database) => {
        const empty = (table: string) =>
          Number(
            (
              database.prepare(`SELECT count(*) AS n FROM ${table} WHERE metadata = '{}'`).get() as {
                n: number;
              }
            ).n,
          );
        const charged = 2 * (empty("memory_history") + empty("memory_events") + empty("memory_documents"));
        database.exec(
          `UPDATE memory_tenant_usage SET metadata_bytes = metadata_bytes + ${charged}; PRAGMA user_version = 13;`,
        );
      }),
    close: async () => {},
  };
}

/** Rows of a query written with SQLite's `?` placeholders, run on PostgreSQL's numbered ones. */
export function postgresRows(client: pg.Client) {
  return async (sql: string, parameters: readonly unknown[] = []) => {
    let n = 0;
    return (
      await client.query(
        sql.replaceAll("?", () => `$${++n}`),
        [...parameters],
      )
    ).rows as Record<string, unknown>[];
  };
}

export async function postgresMetadataSubject(name: string): Promise<MetadataSubject> {
  const database: TestDatabase = await createTestDatabase(name);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const query = postgresRows(client);
  return {
    name: "PostgreSQL",
    open: () => createPostgresStore({ connectionString: database.url }),
    rows: query,
    before0556: async () => {
      for (const table of ["memory_tenant_usage", "memory_history", "memory_events", "memory_documents"]) {
        await query(`ALTER TABLE ${table} DROP COLUMN metadata_bytes`);
      }
      await query("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 13");
    },
    before0559: async () => {
      let charged = 0;
      for (const table of ["memory_history", "memory_events", "memory_documents"]) {
        const rows = await query(
          `UPDATE ${table} SET metadata_bytes = 2 WHERE metadata = '{}'::jsonb RETURNING 1`,
        );
        charged += 2 * rows.length;
      }
      await query("UPDATE memory_tenant_usage SET metadata_bytes = metadata_bytes + ?", [charged]);
      await query("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 15");
    },
    close: async () => {
      await client.end();
      await database.drop();
    },
  };
}

const utf8 = (text: string) => Buffer.byteLength(text, "utf8");

/**
 * The tenant's metadata bytes recomputed from its rows: the JSON text of each memory version's,
 * event's and document's metadata, read back and written as the service writes it (PostgreSQL's
 * JSONB reorders keys, which keeps the length); an empty object none. Memory rows without a history
 * row count their own.
 */
export async function metadataFromRows(subject: MetadataSubject, tenant: string): Promise<number> {
  let total = 0;
  const tables = [
    "SELECT metadata FROM memory_history WHERE tenant_id = ?",
    "SELECT metadata FROM memory_events WHERE tenant_id = ?",
    "SELECT metadata FROM memory_documents WHERE tenant_id = ?",
    `SELECT metadata FROM memory_memories AS m WHERE tenant_id = ?
       AND NOT EXISTS (SELECT 1 FROM memory_history AS h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id)`,
  ];
  for (const sql of tables) {
    for (const { metadata } of await subject.rows(sql, [tenant])) {
      const value = typeof metadata === "string" ? JSON.parse(metadata) : metadata;
      // No metadata is stored as `{}`, and costs nothing (ADR 0559).
      if (Object.keys(value as object).length > 0) total += utf8(JSON.stringify(value));
    }
  }
  return total;
}
