/**
 * The two stores the metadata quota is checked on (ADR 0556): a SQLite file and PostgreSQL, each
 * with a way to read rows from outside the service and to step the schema back before the migration
 * that counts metadata, as a store made before it.
 */
import { createHash } from "node:crypto";
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
  /**
   * Charges the metadata the service wrote itself (each episode's versions, each import's events) as
   * writes did before ADR 0563, drops the columns its migration added and steps the schema back before it.
   */
  before0563(): Promise<void>;
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
    before0563: async () => {
      const extra = await servicesOwnBytes((sql) =>
        Promise.resolve(withDatabase((database) => database.prepare(sql).all() as Record<string, unknown>[])),
      );
      withDatabase((database) => {
        for (const [tenant, charged] of extra) {
          database
            .prepare("UPDATE memory_tenant_usage SET metadata_bytes = metadata_bytes + ? WHERE tenant_id = ?")
            .run(charged, tenant);
        }
        database.exec(`
ALTER TABLE memory_memories DROP COLUMN metadata_bytes;
ALTER TABLE memory_history DROP COLUMN metadata_bytes;
ALTER TABLE memory_events DROP COLUMN metadata_bytes;
PRAGMA user_version = 14;`);
      });
    },
    close: async () => {},
  };
}

/** Per tenant, what the service's own metadata was charged before ADR 0563: its JSON text, every row. */
async function servicesOwnBytes(
  rows: (sql: string) => Promise<Record<string, unknown>[]>,
  charge?: (table: string, key: Record<string, unknown>, bytes: number) => Promise<void>,
): Promise<Map<string, number>> {
  const extra = new Map<string, number>();
  const add = (tenant: unknown, bytes: number) =>
    extra.set(String(tenant), (extra.get(String(tenant)) ?? 0) + bytes);
  const versions = await rows(`SELECT h.tenant_id, h.memory_id, h.version, h.metadata FROM memory_history AS h
    JOIN memory_memories AS m ON m.tenant_id = h.tenant_id AND m.id = h.memory_id WHERE m.kind = 'episode'`);
  for (const row of versions) {
    const bytes = utf8(JSON.stringify(parsed(row.metadata)));
    add(row.tenant_id, bytes);
    await charge?.(
      "memory_history",
      { tenant_id: row.tenant_id, memory_id: row.memory_id, version: row.version },
      bytes,
    );
  }
  for (const row of await rows("SELECT tenant_id, id, metadata FROM memory_events WHERE source = 'import'")) {
    const bytes = utf8(JSON.stringify(parsed(row.metadata)));
    add(row.tenant_id, bytes);
    await charge?.("memory_events", { tenant_id: row.tenant_id, id: row.id }, bytes);
  }
  return extra;
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
    before0563: async () => {
      const extra = await servicesOwnBytes(
        (sql) => query(sql),
        async (table, key, bytes) => {
          const columns = Object.keys(key);
          await query(
            `UPDATE ${table} SET metadata_bytes = ? WHERE ${columns.map((column) => `${column} = ?`).join(" AND ")}`,
            [bytes, ...Object.values(key)],
          );
        },
      );
      for (const [tenant, charged] of extra) {
        await query(
          "UPDATE memory_tenant_usage SET metadata_bytes = metadata_bytes + ? WHERE tenant_id = ?",
          [charged, tenant],
        );
      }
      await query("ALTER TABLE memory_memories DROP COLUMN metadata_bytes");
      await query("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 16");
    },
    close: async () => {
      await client.end();
      await database.drop();
    },
  };
}

const utf8 = (text: string) => Buffer.byteLength(text, "utf8");
const parsed = (metadata: unknown) =>
  (typeof metadata === "string" ? JSON.parse(metadata) : metadata) as Record<string, unknown>;
/** What metadata costs as a caller sends it: its JSON text, an empty object none (ADR 0559). */
const charge = (metadata: Record<string, unknown>) =>
  Object.keys(metadata).length > 0 ? utf8(JSON.stringify(metadata)) : 0;

/** The id of the episode the service keeps for an event (ADR 0361): a UUID-shaped digest of the two. */
export function episodeIdOf(tenant: string, eventId: string): string {
  const hex = createHash("sha256").update(["event-episode", tenant, eventId].join("\u0000")).digest("hex");
  const variant = ((Number.parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The tenant's metadata bytes recomputed from its rows, as callers sent them (ADR 0563): the JSON
 * text of each memory version's, event's and document's metadata, read back and written as the
 * service writes it (PostgreSQL's JSONB reorders keys, which keeps the length); an empty object none.
 * Memory rows without a history row count their own. What the service wrote itself is free: an
 * event's episode's speaker and role (the episode's versions holding the metadata its first one
 * had), and an import job's own events' metadata.
 */
export async function metadataFromRows(subject: MetadataSubject, tenant: string): Promise<number> {
  let total = 0;
  const events = await subject.rows(
    "SELECT id, metadata, import_job_id FROM memory_events WHERE tenant_id = ?",
    [tenant],
  );
  const imports = new Set(
    (await subject.rows("SELECT id FROM memory_jobs WHERE tenant_id = ? AND type = 'import'", [tenant])).map(
      (row) => String(row.id),
    ),
  );
  for (const event of events) {
    const metadata = parsed(event.metadata);
    const byImport = event.import_job_id !== null && imports.has(String(event.import_job_id));
    if (!byImport) total += charge(metadata);
  }
  const episodes = new Set(events.map((event) => episodeIdOf(tenant, String(event.id))));
  const versions = await subject.rows(
    "SELECT memory_id, version, metadata FROM memory_history WHERE tenant_id = ? ORDER BY memory_id, version",
    [tenant],
  );
  const first = new Map<string, string>();
  for (const { memory_id: id, version, metadata } of versions) {
    const text = JSON.stringify(sortedKeys(parsed(metadata)));
    if (Number(version) === 1) first.set(String(id), text);
    const servicesOwn = episodes.has(String(id)) && first.get(String(id)) === text;
    if (!servicesOwn) total += charge(parsed(metadata));
  }
  const sql = [
    "SELECT metadata FROM memory_documents WHERE tenant_id = ?",
    `SELECT metadata FROM memory_memories AS m WHERE tenant_id = ?
       AND NOT EXISTS (SELECT 1 FROM memory_history AS h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id)`,
  ];
  for (const query of sql) {
    for (const { metadata } of await subject.rows(query, [tenant])) total += charge(parsed(metadata));
  }
  return total;
}

/** The same object with its keys in order, so two readings of one JSONB value compare equal. */
function sortedKeys(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).sort(([left], [right]) => (left < right ? -1 : 1)));
}
