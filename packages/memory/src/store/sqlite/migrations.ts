/**
 * The SQLite store's schema, one numbered migration at a time. To change the schema, append
 * `{ version: n + 1, name, up }`; never edit a migration that has shipped (files already carry it).
 */
import type { DatabaseSync } from "node:sqlite";
import type { SqliteMigration } from "@tackle/storage";
import { fillUsageSql, importKeys, serviceEpisodeSql } from "../tenant-usage.ts";
import { sqliteBytes, sqliteMetadataBytes, sqliteMetadataTextBytes } from "./purge-sqlite-scope.ts";
import { sqliteSchema } from "./schema.ts";

/** The columns whose change moves a tenant's memory generation: all but the access counters. */
const generationColumns = [
  "tenant_id",
  "user_id",
  "agent_id",
  "session_id",
  "scope_key",
  "kind",
  "content",
  "metadata",
  "version",
  "status",
  "importance",
  "helpful",
  "unhelpful",
  "successes",
  "failures",
  "embedding",
  "created_at",
  "updated_at",
].join(", ");

export const sqliteMigrations: readonly SqliteMigration[] = [
  {
    version: 1,
    name: "memories, events, knowledge, blocks, traces, jobs",
    // Files made before versioning: their older search-index layouts are rebuilt first, then the
    // IF NOT EXISTS schema fills in what is missing and the file is stamped version 1.
    up: (database) => {
      dropUnscopedIndex(database);
      dropIndexWithoutPrefixes(database);
      database.exec(sqliteSchema);
    },
  },
  {
    version: 2,
    name: "neighbouring turns by scope and write order",
    // A turn's neighbours are the nearest active rows of its scope before and after it: an ordered
    // range of this index instead of a scan of the rows written around it by every scope.
    up: (database) => {
      database.exec(
        "CREATE INDEX IF NOT EXISTS memories_scope_seq ON memories(tenant_id, scope_key, seq) WHERE status = 'active'",
      );
    },
  },
  {
    version: 3,
    name: "idempotency keys of writes",
    // Per tenant: the key of a write, a hash of its request, and the answer once given; swept when expired.
    up: `
CREATE TABLE IF NOT EXISTS idempotency_keys (
  tenant_id TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  answer TEXT,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys(expires_at);
`,
  },
  {
    version: 4,
    name: "the scope of each idempotency record",
    // A purge of a scope deletes the answers of writes made for it (ADR 0365).
    up: (database) => {
      const columns = database.prepare("PRAGMA table_info(idempotency_keys)").all() as { name: string }[];
      for (const column of ["user_id", "agent_id", "session_id"]) {
        if (columns.some((existing) => existing.name === column)) continue;
        database.exec(`ALTER TABLE idempotency_keys ADD COLUMN ${column} TEXT`);
      }
      database.exec(
        "CREATE INDEX IF NOT EXISTS idempotency_keys_user ON idempotency_keys(tenant_id, user_id)",
      );
    },
  },
  {
    version: 5,
    name: "a generation of each tenant's memories",
    // Changed by every write to a memory's text, scope, kind, status, weights or dates (not by its
    // access counts): the service keeps a scope's memories in process while it is unchanged. A random
    // value, not a counter: a rolled-back write can never leave a number a later write reuses.
    up: `
CREATE TABLE IF NOT EXISTS memory_generations (
  tenant_id TEXT PRIMARY KEY,
  generation INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS memory_generation_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (new.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
CREATE TRIGGER IF NOT EXISTS memory_generation_delete AFTER DELETE ON memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (old.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
CREATE TRIGGER IF NOT EXISTS memory_generation_update
  AFTER UPDATE OF ${generationColumns} ON memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (new.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
`,
  },
  {
    version: 6,
    name: "every table, index and trigger named memory_",
    // One layout across Tackle's stores (ADR 0371): each store's objects carry its package's prefix.
    // SQLite cannot rename an index or a trigger, and the chunk index names its content table, so
    // those are dropped and made again under the new names; the tables (and the contentless memory
    // index, with its shadow tables) are renamed in place, keeping every row.
    up: (database) => {
      database.exec(`
DROP TRIGGER IF EXISTS memories_search_insert;
DROP TRIGGER IF EXISTS memories_search_delete;
DROP TRIGGER IF EXISTS memories_search_update;
DROP TRIGGER IF EXISTS chunks_fts_insert;
DROP TRIGGER IF EXISTS memory_generation_insert;
DROP TRIGGER IF EXISTS memory_generation_delete;
DROP TRIGGER IF EXISTS memory_generation_update;
DROP TABLE IF EXISTS chunks_fts;
${[
  "memories_active_dedupe",
  "memories_tenant_user",
  "memories_tenant_agent",
  "memories_tenant_session",
  "memories_tenant_updated",
  "memories_scope_seq",
  "access_log_tenant_day",
  "events_custom_id",
  "events_tenant_session",
  "traces_tenant",
  "jobs_tenant",
  "idempotency_keys_expiry",
  "idempotency_keys_user",
]
  .map((index) => `DROP INDEX IF EXISTS ${index};`)
  .join("\n")}
${[
  "memories",
  "memories_search",
  "access_log",
  "events",
  "documents",
  "chunks",
  "core_blocks",
  "traces",
  "jobs",
  "idempotency_keys",
]
  .map((table) => `ALTER TABLE ${table} RENAME TO memory_${table};`)
  .join("\n")}
CREATE UNIQUE INDEX memory_memories_active_dedupe
  ON memory_memories(tenant_id, scope_key, dedupe_key) WHERE status = 'active';
CREATE INDEX memory_memories_tenant_user ON memory_memories(tenant_id, user_id);
CREATE INDEX memory_memories_tenant_agent ON memory_memories(tenant_id, agent_id);
CREATE INDEX memory_memories_tenant_session ON memory_memories(tenant_id, session_id);
CREATE INDEX memory_memories_tenant_updated ON memory_memories(tenant_id, updated_at);
CREATE INDEX memory_memories_scope_seq ON memory_memories(tenant_id, scope_key, seq) WHERE status = 'active';
CREATE INDEX memory_access_log_tenant_day ON memory_access_log(tenant_id, day);
CREATE UNIQUE INDEX memory_events_custom_id ON memory_events(tenant_id, custom_id) WHERE custom_id IS NOT NULL;
CREATE INDEX memory_events_tenant_session ON memory_events(tenant_id, session_id, seq);
CREATE INDEX memory_traces_tenant ON memory_traces(tenant_id, seq);
CREATE INDEX memory_jobs_tenant ON memory_jobs(tenant_id, seq);
CREATE INDEX memory_idempotency_keys_expiry ON memory_idempotency_keys(expires_at);
CREATE INDEX memory_idempotency_keys_user ON memory_idempotency_keys(tenant_id, user_id);

CREATE TRIGGER memory_memories_search_insert AFTER INSERT ON memory_memories BEGIN
  INSERT INTO memory_memories_search(rowid, content, scope) VALUES (new.seq, new.content, new.scope_tokens);
END;
CREATE TRIGGER memory_memories_search_delete AFTER DELETE ON memory_memories BEGIN
  DELETE FROM memory_memories_search WHERE rowid = old.seq;
END;
CREATE TRIGGER memory_memories_search_update AFTER UPDATE OF content ON memory_memories BEGIN
  DELETE FROM memory_memories_search WHERE rowid = old.seq;
  INSERT INTO memory_memories_search(rowid, content, scope) VALUES (new.seq, new.content, new.scope_tokens);
END;

CREATE VIRTUAL TABLE memory_chunks_fts USING fts5(
  content, content='memory_chunks', content_rowid='seq', tokenize='porter unicode61'
);
INSERT INTO memory_chunks_fts(memory_chunks_fts) VALUES ('rebuild');
CREATE TRIGGER memory_chunks_fts_insert AFTER INSERT ON memory_chunks BEGIN
  INSERT INTO memory_chunks_fts(rowid, content) VALUES (new.seq, new.content);
END;

CREATE TRIGGER memory_generation_insert AFTER INSERT ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (new.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
CREATE TRIGGER memory_generation_delete AFTER DELETE ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (old.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
CREATE TRIGGER memory_generation_update
  AFTER UPDATE OF ${generationColumns} ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation) VALUES (new.tenant_id, random())
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random();
END;
`);
    },
  },
  {
    version: 7,
    name: "access records counted per day; indexes for retention",
    // Retention (ADR 0537): an access record was a row per search, hit and read; it is now a count per
    // tenant, day, kind, scope and memory (`scope_key`, the three fields as a JSON array, makes absent
    // fields comparable; a search names no memory: ''), so a flood of searches adds to counts. The
    // old rows are summed into it. Traces expire by age and finished jobs by the time they finished:
    // an index each; an import job an event names is kept, found by its own index on the events.
    up: `
CREATE TABLE memory_access_counts (
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  scope_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  memory_id TEXT NOT NULL,
  day TEXT NOT NULL,
  accesses INTEGER NOT NULL
);
INSERT INTO memory_access_counts (tenant_id, user_id, agent_id, session_id, scope_key, kind, memory_id, day, accesses)
  SELECT tenant_id, user_id, agent_id, session_id, json_array(user_id, agent_id, session_id), kind,
    coalesce(memory_id, ''), day, count(*)
  FROM memory_access_log
  GROUP BY tenant_id, user_id, agent_id, session_id, kind, coalesce(memory_id, ''), day;
DROP TABLE memory_access_log;
ALTER TABLE memory_access_counts RENAME TO memory_access_log;
CREATE UNIQUE INDEX memory_access_log_key ON memory_access_log(tenant_id, day, kind, scope_key, memory_id);
CREATE INDEX memory_access_log_day ON memory_access_log(day);
CREATE INDEX memory_traces_created ON memory_traces(created_at);
CREATE INDEX memory_jobs_finished ON memory_jobs(finished_at) WHERE status IN ('succeeded', 'failed');
CREATE INDEX memory_events_import_job ON memory_events(tenant_id, import_job_id) WHERE import_job_id IS NOT NULL;
`,
  },
  {
    version: 8,
    name: "what each tenant stores, counted for its quotas",
    // Quotas (ADR 0538): one counter row per tenant that every write and purge changes in its own
    // transaction, so a write checks its tenant's limits without counting rows. Filled here from the
    // rows already stored: memory rows of any status, the content bytes of every memory version
    // (history), events and their content bytes, and the bytes of document chunks.
    up: `
CREATE TABLE IF NOT EXISTS memory_tenant_usage (
  tenant_id TEXT PRIMARY KEY,
  memories INTEGER NOT NULL DEFAULT 0,
  memory_bytes INTEGER NOT NULL DEFAULT 0,
  events INTEGER NOT NULL DEFAULT 0,
  event_bytes INTEGER NOT NULL DEFAULT 0,
  document_bytes INTEGER NOT NULL DEFAULT 0
);
${fillUsageSql(sqliteBytes, undefined)};
`,
  },
  {
    version: 9,
    name: "a change stamp on each memory",
    // ADR 0541: each tenant counts its memory changes (`stamp`, one up per row written, in commit
    // order: SQLite has one writer at a time) and each memory row keeps the count of its last
    // change, so a search's snapshot reads only the rows of its scope changed since the count it
    // holds. `removed` is the count of the tenant's last row deleted or moved to another scope: a
    // snapshot older than it is read again whole. The random generation stays as it was.
    // Files whose version was set back (as made before versioning) may hold the columns already.
    up: (database) => {
      addMissingColumn(database, "memory_generations", "stamp INTEGER NOT NULL DEFAULT 0");
      addMissingColumn(database, "memory_generations", "removed INTEGER NOT NULL DEFAULT 0");
      addMissingColumn(database, "memory_memories", "stamp INTEGER NOT NULL DEFAULT 0");
      database.exec(`
CREATE INDEX IF NOT EXISTS memory_memories_stamp ON memory_memories(tenant_id, stamp);
DROP TRIGGER IF EXISTS memory_generation_insert;
DROP TRIGGER IF EXISTS memory_generation_delete;
DROP TRIGGER IF EXISTS memory_generation_update;
CREATE TRIGGER memory_generation_insert AFTER INSERT ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation, stamp) VALUES (new.tenant_id, random(), 1)
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random(), stamp = stamp + 1;
  UPDATE memory_memories SET stamp = (SELECT stamp FROM memory_generations WHERE tenant_id = new.tenant_id)
    WHERE seq = new.seq;
END;
CREATE TRIGGER memory_generation_delete AFTER DELETE ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation, stamp, removed) VALUES (old.tenant_id, random(), 1, 1)
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random(), stamp = stamp + 1, removed = stamp + 1;
END;
CREATE TRIGGER memory_generation_update
  AFTER UPDATE OF ${generationColumns} ON memory_memories BEGIN
  INSERT INTO memory_generations (tenant_id, generation, stamp) VALUES (new.tenant_id, random(), 1)
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random(), stamp = stamp + 1;
  UPDATE memory_generations SET removed = stamp
    WHERE tenant_id = old.tenant_id AND (old.scope_key IS NOT new.scope_key OR old.tenant_id IS NOT new.tenant_id);
  INSERT INTO memory_generations (tenant_id, generation, stamp, removed)
    SELECT old.tenant_id, random(), 1, 1 WHERE old.tenant_id IS NOT new.tenant_id
    ON CONFLICT (tenant_id) DO UPDATE SET generation = random(), stamp = stamp + 1, removed = stamp + 1;
  UPDATE memory_memories SET stamp = (SELECT stamp FROM memory_generations WHERE tenant_id = new.tenant_id)
    WHERE seq = new.seq;
END;
`);
    },
  },
  {
    version: 10,
    name: "traces and jobs indexed per user, for retention",
    // Retention per user (ADR 0545): beside the tenant's cut, each user's traces and finished jobs
    // are cut to its newest, walking an index of the user's rows in write order (rows that name no
    // user are one identity: `user_id IS NULL` walks the same index).
    up: `
CREATE INDEX IF NOT EXISTS memory_traces_user ON memory_traces(tenant_id, user_id, seq);
CREATE INDEX IF NOT EXISTS memory_jobs_user ON memory_jobs(tenant_id, user_id, seq);
`,
  },
  {
    version: 11,
    name: "finished jobs keep no input; jobs waiting indexed per tenant",
    // ADR 0551: a finished job keeps its outcome, not its input (an import's turns are events by
    // then), so jobs finished before it give their inputs' room back; the jobs a tenant has waiting
    // are counted at each enqueue against its quota, walking only the waiting rows.
    up: `
UPDATE memory_jobs SET input = 'null' WHERE status IN ('succeeded', 'failed');
CREATE INDEX IF NOT EXISTS memory_jobs_waiting ON memory_jobs(tenant_id) WHERE status IN ('queued', 'running');
`,
  },
  {
    version: 12,
    name: "metadata bytes counted for the tenant's quota",
    // ADR 0556: the JSON text of the metadata of every memory version, event and document counts
    // against the tenant's `metadataBytes`. SQLite keeps the text each write was given, so its length
    // is what the write charged: no column per row; the counter is filled from the rows stored.
    up: (database) => {
      addMissingColumn(database, "memory_tenant_usage", "metadata_bytes INTEGER NOT NULL DEFAULT 0");
      // As shipped: every row's JSON text, `{}` too (migration 14 counts again without it).
      database.exec(fillUsageSql(sqliteBytes, undefined, () => sqliteBytes("metadata")));
    },
  },
  {
    version: 13,
    name: "each core block keeps its bytes, summed through an index",
    // ADR 0557: a core-block save counts the tenant's blocks and their bytes (ADR 0551). Summing the
    // UTF-8 length of every value read each value's overflow pages, so a save cost in proportion to all
    // the tenant held; each block now keeps its bytes, filled here for the blocks stored, and the sum
    // walks the index on (tenant_id, value_bytes) without reading a row.
    up: (database) => {
      addMissingColumn(database, "memory_core_blocks", "value_bytes INTEGER NOT NULL DEFAULT 0");
      database.exec(`
UPDATE memory_core_blocks SET value_bytes = ${sqliteBytes("value")};
CREATE INDEX IF NOT EXISTS memory_core_blocks_bytes ON memory_core_blocks(tenant_id, value_bytes);
`);
    },
  },
  {
    version: 14,
    name: "no metadata and empty metadata cost nothing",
    // ADR 0559: a row without metadata (its `{}`) is charged 0 bytes, not 2, so a tenant at its
    // metadata limit can still store what carries none. The counters filled by migration 12 and the
    // writes before this one charged `{}`: each tenant's is counted again from its rows.
    up: (database) => {
      database.exec(fillUsageSql(sqliteBytes, undefined, sqliteMetadataTextBytes));
    },
  },
  {
    version: 15,
    name: "metadata the service writes itself costs nothing",
    // ADR 0563: only what a caller sent is charged. An event's episode carries the speaker and role the
    // service wrote, an import's event the job, conversation and turn: neither is charged, which the
    // JSON text does not tell, so memory versions and events keep their charge in a column (as on
    // PostgreSQL), and each memory its current one, which a change keeping the metadata keeps.
    up: (database) => {
      for (const table of ["memory_memories", "memory_history", "memory_events"]) {
        addMissingColumn(database, table, "metadata_bytes INTEGER NOT NULL DEFAULT 0");
      }
      const text = sqliteMetadataTextBytes();
      database.exec(`
UPDATE memory_history SET metadata_bytes = ${text};
UPDATE memory_events SET metadata_bytes = ${text};
UPDATE memory_history SET metadata_bytes = 0 WHERE metadata_bytes <> 0 AND EXISTS (
  SELECT 1 FROM memory_memories AS m JOIN memory_history AS c ON c.tenant_id = m.tenant_id AND c.memory_id = m.id AND c.version = 1
  WHERE m.tenant_id = memory_history.tenant_id AND m.id = memory_history.memory_id AND c.metadata = memory_history.metadata
    AND ${serviceEpisodeSql.sqlite});
UPDATE memory_events SET metadata_bytes = 0 WHERE metadata_bytes <> 0 AND source = 'import'
  AND json_extract(metadata, '$.importJobId') = import_job_id
  AND NOT EXISTS (SELECT 1 FROM json_each(memory_events.metadata) WHERE key NOT IN (${importKeys}))
  AND EXISTS (SELECT 1 FROM memory_jobs AS j WHERE j.tenant_id = memory_events.tenant_id AND j.id = memory_events.import_job_id AND j.type = 'import');
UPDATE memory_memories SET metadata_bytes = coalesce(
  (SELECT h.metadata_bytes FROM memory_history AS h WHERE h.tenant_id = memory_memories.tenant_id AND h.memory_id = memory_memories.id ORDER BY h.version DESC LIMIT 1),
  ${text});
${fillUsageSql(sqliteBytes, undefined, sqliteMetadataBytes)};
`);
    },
  },
  {
    version: 16,
    name: "novelty scan records keep no memory's text",
    // ADR 0564: a novelty scan's record names each candidate's nearest memory by id; it quoted its
    // text, which a purge of the memory's (narrower) scope left in the scan's record. Records stored
    // before drop the quoted text.
    up: (database) => {
      const rows = database
        .prepare(
          `SELECT seq, result FROM memory_jobs WHERE type = 'novelty_scan' AND result LIKE '%"nearest"%'`,
        )
        .all() as { seq: number; result: string }[];
      const update = database.prepare("UPDATE memory_jobs SET result = ? WHERE seq = ?");
      for (const row of rows) update.run(JSON.stringify(withoutQuotes(JSON.parse(row.result))), row.seq);
    },
  },
];

/** A novelty scan's recorded result without the nearest memories' text (migration 16). */
function withoutQuotes(result: { results?: unknown }): unknown {
  if (!Array.isArray(result?.results)) return result;
  return {
    ...result,
    results: result.results.map((item: { nearest?: { content?: unknown } }) => {
      if (item?.nearest === undefined || item.nearest === null) return item;
      const { content: _content, ...nearest } = item.nearest;
      return { ...item, nearest };
    }),
  };
}

function addMissingColumn(database: DatabaseSync, table: string, column: string): void {
  const columns = database.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
  if (columns.some((existing) => existing.name === column.split(" ")[0])) return;
  database.exec(`ALTER TABLE ${table} ADD COLUMN ${column}`);
}

/** Files made before the scoped index: add the column and drop the old index (rebuilt on open). */
function dropUnscopedIndex(database: DatabaseSync): void {
  const columns = database.prepare("PRAGMA table_info(memories)").all() as { name: string }[];
  if (columns.length === 0 || columns.some((column) => column.name === "scope_tokens")) return;
  database.exec(`
    ALTER TABLE memories ADD COLUMN scope_tokens TEXT NOT NULL DEFAULT '';
    DROP TRIGGER IF EXISTS memories_fts_insert;
    DROP TRIGGER IF EXISTS memories_fts_delete;
    DROP TRIGGER IF EXISTS memories_fts_update;
    DROP TABLE IF EXISTS memories_fts;`);
}

/**
 * Files made before the five-character prefix index: drop the contentless search index and mark every
 * memory for reindexing; the schema recreates the index and the store's backfill refills it from
 * `memories` (the text is kept there), so every memory stays findable.
 */
function dropIndexWithoutPrefixes(database: DatabaseSync): void {
  const table = database
    .prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'memories_search'")
    .get() as { sql: string } | undefined;
  if (table === undefined || /prefix\s*=/.test(table.sql)) return;
  database.exec(`
    DROP TRIGGER IF EXISTS memories_search_insert;
    DROP TRIGGER IF EXISTS memories_search_delete;
    DROP TRIGGER IF EXISTS memories_search_update;
    DROP TABLE memories_search;
    UPDATE memories SET scope_tokens = '';`);
}
