/**
 * What the purge property reads from outside the service (ADR 0559): every marker word left in any
 * table's text, JSON, binary or full-text column; on SQLite the file's own bytes; the tenant's usage
 * counted again from its rows; and rows that outlive the record they belong to.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after } from "node:test";
import { createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase } from "@tackle/test-support";
import pg from "pg";
import type { TenantUsage } from "../../src/store/tenant-usage.ts";
import { type MetadataSubject, metadataFromRows, postgresRows } from "./metadata-subjects.ts";

export interface PurgeSubject extends Pick<MetadataSubject, "name" | "rows"> {
  /** A store for program `round`: on SQLite a file of its own, on PostgreSQL one database for all. */
  open(round: number): Promise<MemoryStore>;
  /** Every marker of `prefix` (`zq<round>k`) found in any column of any table, lowercased. */
  scan(prefix: string): Promise<Set<string>>;
  /** SQLite: the markers of `prefix` in the file's bytes after a checkpoint and a vacuum. */
  fileBytes?(prefix: string): Set<string>;
  /** PostgreSQL: the database's address, for a connection of a test's own. */
  readonly url?: string;
  close(): Promise<void>;
}

const markersIn = (text: string, prefix: string, into: Set<string>) => {
  for (const match of text.toLowerCase().matchAll(new RegExp(`${prefix}\\d+q`, "g"))) into.add(match[0]);
};

/**
 * A temporary directory for a suite's SQLite files, and the subjects it opens: all closed, and the
 * directory removed, after the suite.
 */
export function purgeSubjectsOfSuite(prefix: string): {
  readonly directory: string;
  readonly subjects: PurgeSubject[];
} {
  const directory = mkdtempSync(join(tmpdir(), prefix));
  const subjects: PurgeSubject[] = [];
  after(async () => {
    for (const subject of subjects) await subject.close();
    rmSync(directory, { recursive: true, force: true });
  });
  return { directory, subjects };
}

export function sqlitePurgeSubject(directory: string): PurgeSubject {
  let path = "";
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
    open: async (round) => {
      path = `${directory}/purge-${round}.db`;
      return createSqliteStore({ path });
    },
    rows: async (sql, parameters) =>
      withDatabase((database) => database.prepare(sql).all(...(parameters as never[])) as never),
    scan: async (prefix) =>
      withDatabase((database) => {
        const found = new Set<string>();
        const tables = database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
        for (const { name } of tables as { name: string }[]) {
          const statement = database.prepare(`SELECT * FROM "${name}"`);
          statement.setReadBigInts(true);
          for (const row of statement.all()) {
            for (const value of Object.values(row)) {
              if (typeof value === "string") markersIn(value, prefix, found);
              else if (value instanceof Uint8Array)
                markersIn(Buffer.from(value).toString("latin1"), prefix, found);
            }
          }
        }
        return found;
      }),
    fileBytes: (prefix) => {
      withDatabase((database) =>
        database.exec("PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);"),
      );
      const found = new Set<string>();
      for (const file of [path, `${path}-wal`].filter((file) => existsSync(file))) {
        markersIn(readFileSync(file).toString("latin1"), prefix, found);
      }
      return found;
    },
    close: async () => {},
  };
}

export async function postgresPurgeSubject(name: string): Promise<PurgeSubject> {
  const database = await createTestDatabase(name);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const query = postgresRows(client);
  return {
    name: "PostgreSQL",
    url: database.url,
    open: () => createPostgresStore({ connectionString: database.url }),
    rows: query,
    scan: async (prefix) => {
      const columns = (await query(
        `SELECT c.table_name AS t, c.column_name AS c, c.data_type AS type FROM information_schema.columns AS c
           JOIN information_schema.tables AS t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
           AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea', 'tsvector', 'ARRAY')`,
      )) as { t: string; c: string; type: string }[];
      const found = new Set<string>();
      for (const { t, c, type } of columns) {
        const text = type === "bytea" ? `encode("${c}", 'escape')` : `"${c}"::text`;
        const rows = await query(`SELECT ${text} AS v FROM "${t}" WHERE ${text} ILIKE ?`, [`%${prefix}%`]);
        for (const { v } of rows) markersIn(String(v), prefix, found);
      }
      return found;
    },
    close: async () => {
      await client.end();
      await database.drop();
    },
  };
}

const utf8 = (text: unknown) => Buffer.byteLength(String(text), "utf8");

/** The tenant's usage counted from its rows, as ADR 0538 and ADR 0556 define each counter. */
export async function usageFromRows(
  subject: Pick<MetadataSubject, "rows">,
  tenant: string,
): Promise<TenantUsage> {
  const contents = async (sql: string) =>
    (await subject.rows(sql, [tenant])).reduce((sum, row) => sum + utf8(row.content), 0);
  const count = async (table: string) =>
    (await subject.rows(`SELECT id FROM ${table} WHERE tenant_id = ?`, [tenant])).length;
  return {
    memories: await count("memory_memories"),
    memoryBytes:
      (await contents("SELECT content FROM memory_history WHERE tenant_id = ?")) +
      (await contents(`SELECT content FROM memory_memories AS m WHERE tenant_id = ? AND NOT EXISTS
           (SELECT 1 FROM memory_history AS h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id)`)),
    events: await count("memory_events"),
    eventBytes: await contents("SELECT content FROM memory_events WHERE tenant_id = ?"),
    documentBytes: await contents("SELECT content FROM memory_chunks WHERE tenant_id = ?"),
    metadataBytes: await metadataFromRows(subject as MetadataSubject, tenant),
  };
}

/**
 * Rows of the tenant left without what they belong to: versions of no memory, chunks of no document,
 * access records naming no memory. A purge deletes a record whole, so there are none.
 */
export async function orphansOf(subject: Pick<MetadataSubject, "rows">, tenant: string): Promise<string[]> {
  const checks = {
    versions: `SELECT memory_id AS id FROM memory_history AS h WHERE tenant_id = ? AND NOT EXISTS
       (SELECT 1 FROM memory_memories AS m WHERE m.tenant_id = h.tenant_id AND m.id = h.memory_id)`,
    chunks: `SELECT document_id AS id FROM memory_chunks AS c WHERE tenant_id = ? AND NOT EXISTS
       (SELECT 1 FROM memory_documents AS d WHERE d.tenant_id = c.tenant_id AND d.id = c.document_id)`,
    accessRecords: `SELECT memory_id AS id FROM memory_access_log AS a WHERE tenant_id = ? AND memory_id IS NOT NULL
       AND memory_id <> '' AND NOT EXISTS
       (SELECT 1 FROM memory_memories AS m WHERE m.tenant_id = a.tenant_id AND m.id = a.memory_id)`,
  };
  const found: string[] = [];
  for (const [kind, sql] of Object.entries(checks)) {
    for (const row of await subject.rows(sql, [tenant])) found.push(`${kind}: ${String(row.id)}`);
  }
  return found;
}
