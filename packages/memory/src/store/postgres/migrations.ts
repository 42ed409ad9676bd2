/**
 * The PostgreSQL store's schema, one numbered migration at a time. To change the schema, append
 * `{ version: n + 1, name, up }`; never edit a migration that has shipped.
 */

import type { PostgresMigration } from "@tackle/storage/postgres";
import { fillUsageSql, importKeys, serviceEpisodeSql } from "../tenant-usage.ts";
import { postgresBytes, postgresMetadataBytes } from "./postgres-sql.ts";
import { postgresSchema } from "./schema.ts";

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

/** Migration 7's renames: what migrations 1–6 created without the `memory_` prefix. Shipped: never edit. */
const renamedTables = [
  "memories",
  "access_log",
  "events",
  "documents",
  "chunks",
  "core_blocks",
  "traces",
  "jobs",
  "idempotency_keys",
];
const renamedIndexes = [
  "access_log_tenant_day",
  "chunks_id_key",
  "chunks_pkey",
  "chunks_tsv",
  "core_blocks_pkey",
  "documents_pkey",
  "documents_tenant_id_scope_key_content_hash_key",
  "events_custom_id",
  "events_id_key",
  "events_pkey",
  "events_tenant_session",
  "idempotency_keys_expiry",
  "idempotency_keys_pkey",
  "idempotency_keys_user",
  "jobs_claimable",
  "jobs_id_key",
  "jobs_pkey",
  "jobs_tenant",
  "memories_active_dedupe",
  "memories_id_key",
  "memories_pkey",
  "memories_scope_seq",
  "memories_tenant_agent",
  "memories_tenant_session",
  "memories_tenant_updated",
  "memories_tenant_user",
  "memories_tsv",
  "traces_id_key",
  "traces_pkey",
  "traces_tenant",
];
const renamedSequences = [
  "chunks_seq_seq",
  "events_seq_seq",
  "jobs_seq_seq",
  "memories_seq_seq",
  "traces_seq_seq",
];

export const postgresMigrations: readonly PostgresMigration[] = [
  {
    version: 1,
    name: "memories, events, knowledge, blocks, traces, jobs",
    // IF NOT EXISTS: databases made before versioning already have these tables and are stamped version 1.
    up: postgresSchema,
  },
  {
    version: 2,
    name: "job leases",
    // Jobs are claimed by any process with a lease by the database's clock (see jobLeases).
    up: `
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lease_until TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS jobs_claimable ON jobs(status, seq) WHERE status IN ('queued', 'running');
`,
  },
  {
    version: 3,
    name: "neighbouring turns by scope and write order",
    // A turn's neighbours are the nearest active rows of its scope before and after it: an ordered
    // range of this index instead of a scan of the rows written around it by every scope.
    up: `
CREATE INDEX IF NOT EXISTS memories_scope_seq ON memories(tenant_id, scope_key, seq) WHERE status = 'active';
`,
  },
  {
    version: 4,
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
    version: 5,
    name: "the scope of each idempotency record",
    // A purge of a scope deletes the answers of writes made for it (ADR 0365).
    up: `
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS user_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS agent_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS session_id TEXT;
CREATE INDEX IF NOT EXISTS idempotency_keys_user ON idempotency_keys(tenant_id, user_id);
`,
  },
  {
    version: 6,
    name: "a generation of each tenant's memories",
    // Changed by every write to a memory's text, scope, kind, status, weights or dates (not by its
    // access counts): the service keeps a scope's memories in process while it is unchanged. Drawn
    // from a sequence, so a rolled-back write never leaves a number a later write reuses.
    up: `
CREATE SEQUENCE IF NOT EXISTS memory_generation_seq;
CREATE TABLE IF NOT EXISTS memory_generations (
  tenant_id TEXT PRIMARY KEY,
  generation BIGINT NOT NULL
);
CREATE OR REPLACE FUNCTION memory_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO memory_generations (tenant_id, generation)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END, nextval('memory_generation_seq'))
    ON CONFLICT (tenant_id) DO UPDATE SET generation = EXCLUDED.generation;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_generation_change ON memories;
CREATE TRIGGER memory_generation_change
  AFTER INSERT OR DELETE OR UPDATE OF ${generationColumns} ON memories
  FOR EACH ROW EXECUTE FUNCTION memory_generation_bump();
`,
  },
  {
    version: 7,
    name: "every table, index and sequence named memory_",
    // One layout across Tackle's stores (ADR 0371): each store's objects carry its package's prefix,
    // as durable's and docscript's do, so they can share a schema with each other and an application.
    // Renames keep every row, and the generation trigger and serial defaults follow by OID.
    up: [
      ...renamedTables.map((table) => `ALTER TABLE ${table} RENAME TO memory_${table};`),
      ...renamedIndexes.map((index) => `ALTER INDEX IF EXISTS ${index} RENAME TO memory_${index};`),
      ...renamedSequences.map(
        (sequence) => `ALTER SEQUENCE IF EXISTS ${sequence} RENAME TO memory_${sequence};`,
      ),
    ].join("\n"),
  },
  {
    version: 8,
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
  accesses BIGINT NOT NULL
);
INSERT INTO memory_access_counts (tenant_id, user_id, agent_id, session_id, scope_key, kind, memory_id, day, accesses)
  SELECT tenant_id, user_id, agent_id, session_id, json_build_array(user_id, agent_id, session_id)::text, kind,
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
    version: 9,
    name: "what each tenant stores, counted for its quotas",
    // Quotas (ADR 0538): one counter row per tenant that every write and purge changes in its own
    // transaction (the row lock orders a tenant's writers), so a write checks its tenant's limits
    // without counting rows. Filled here from the rows already stored: memory rows of any status, the
    // content bytes of every memory version (history), events and their bytes, document chunks' bytes.
    up: `
CREATE TABLE IF NOT EXISTS memory_tenant_usage (
  tenant_id TEXT PRIMARY KEY,
  memories BIGINT NOT NULL DEFAULT 0,
  memory_bytes BIGINT NOT NULL DEFAULT 0,
  events BIGINT NOT NULL DEFAULT 0,
  event_bytes BIGINT NOT NULL DEFAULT 0,
  document_bytes BIGINT NOT NULL DEFAULT 0
);
${fillUsageSql(postgresBytes, undefined)};
`,
  },
  {
    version: 10,
    name: "a change stamp on each memory",
    // ADR 0541: each memory row keeps the tenant's generation of its last change (`stamp`), so a
    // search's snapshot reads only the rows of its scope changed since the generation it holds. The
    // trigger's upsert draws the generation from the sequence once it holds the tenant's row lock
    // (ON CONFLICT DO UPDATE locks the row, then computes SET; an insert that succeeds is the
    // tenant's first) and holds the lock to the commit: a tenant's generations rise in commit order,
    // so every row stamped at or below a generation a reader sees has committed. `removed` is the
    // generation of the tenant's last row deleted or moved to another scope: a snapshot older than
    // it is read again whole. Before insert and update (the row takes its stamp), before delete.
    up: `
ALTER TABLE memory_generations ADD COLUMN IF NOT EXISTS removed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memory_memories ADD COLUMN IF NOT EXISTS stamp BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS memory_memories_stamp ON memory_memories(tenant_id, stamp);
CREATE OR REPLACE FUNCTION memory_generation_stamp(tenant TEXT, removal BOOLEAN) RETURNS BIGINT
  LANGUAGE plpgsql AS $$
DECLARE
  drawn BIGINT;
BEGIN
  INSERT INTO memory_generations AS g (tenant_id, generation)
    VALUES (tenant, nextval('memory_generation_seq'))
    ON CONFLICT (tenant_id) DO UPDATE SET generation = nextval('memory_generation_seq')
    RETURNING g.generation INTO drawn;
  IF removal THEN
    UPDATE memory_generations SET removed = drawn WHERE tenant_id = tenant;
  END IF;
  RETURN drawn;
END $$;
CREATE OR REPLACE FUNCTION memory_generation_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM memory_generation_stamp(OLD.tenant_id, true);
    RETURN OLD;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF OLD.tenant_id IS DISTINCT FROM NEW.tenant_id THEN
      PERFORM memory_generation_stamp(OLD.tenant_id, true);
    ELSIF OLD.scope_key IS DISTINCT FROM NEW.scope_key THEN
      NEW.stamp := memory_generation_stamp(NEW.tenant_id, true);
      RETURN NEW;
    END IF;
  END IF;
  NEW.stamp := memory_generation_stamp(NEW.tenant_id, false);
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memory_generation_change ON memory_memories;
DROP FUNCTION IF EXISTS memory_generation_bump();
CREATE TRIGGER memory_generation_change
  BEFORE INSERT OR DELETE OR UPDATE OF ${generationColumns} ON memory_memories
  FOR EACH ROW EXECUTE FUNCTION memory_generation_change();
`,
  },
  {
    version: 11,
    name: "traces and jobs indexed per user, for retention",
    // Retention per user (ADR 0545): beside the tenant's cut, each user's traces and finished jobs
    // are cut to its newest, walking an index of the user's rows in write order. Rows that name no
    // user are one identity; PostgreSQL does not take `user_id IS NULL` as fixing the column for the
    // order (it would sort them), so theirs is a partial index of its own.
    up: `
CREATE INDEX IF NOT EXISTS memory_traces_user ON memory_traces(tenant_id, user_id, seq);
CREATE INDEX IF NOT EXISTS memory_jobs_user ON memory_jobs(tenant_id, user_id, seq);
CREATE INDEX IF NOT EXISTS memory_traces_no_user ON memory_traces(tenant_id, seq) WHERE user_id IS NULL;
CREATE INDEX IF NOT EXISTS memory_jobs_no_user ON memory_jobs(tenant_id, seq) WHERE user_id IS NULL;
`,
  },
  {
    version: 12,
    name: "finished jobs keep no input; jobs waiting indexed per tenant",
    // ADR 0551: a finished job keeps its outcome, not its input (an import's turns are events by
    // then), so jobs finished before it give their inputs' room back; the jobs a tenant has waiting
    // are counted at each enqueue against its quota, walking only the waiting rows.
    up: `
UPDATE memory_jobs SET input = 'null'::jsonb WHERE status IN ('succeeded', 'failed');
CREATE INDEX IF NOT EXISTS memory_jobs_waiting ON memory_jobs(tenant_id) WHERE status IN ('queued', 'running');
`,
  },
  {
    version: 13,
    name: "metadata bytes counted for the tenant's quota",
    // ADR 0556: the metadata of every memory version, event and document counts against the tenant's
    // `metadataBytes`, as the UTF-8 bytes of the JSON text each write is given. JSONB does not keep
    // that text, so each row keeps what it was charged (rows stored before: their JSONB text; a row
    // already charged keeps its count, so running this again changes nothing), and a purge's recount
    // sums what the writes charged. The counter is filled from the rows stored.
    up: `
ALTER TABLE memory_history ADD COLUMN IF NOT EXISTS metadata_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memory_events ADD COLUMN IF NOT EXISTS metadata_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memory_documents ADD COLUMN IF NOT EXISTS metadata_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE memory_history SET metadata_bytes = octet_length(metadata::text) WHERE metadata_bytes = 0;
UPDATE memory_events SET metadata_bytes = octet_length(metadata::text) WHERE metadata_bytes = 0;
UPDATE memory_documents SET metadata_bytes = octet_length(metadata::text) WHERE metadata_bytes = 0;
ALTER TABLE memory_tenant_usage ADD COLUMN IF NOT EXISTS metadata_bytes BIGINT NOT NULL DEFAULT 0;
${fillUsageSql(postgresBytes, undefined, (table) => (table === "memory_memories" ? "octet_length(metadata::text)" : "metadata_bytes"))};
`,
  },
  {
    version: 14,
    name: "each core block keeps its bytes, summed through an index",
    // ADR 0557: a core-block save counts the tenant's blocks and their bytes (ADR 0551) under the
    // tenant's counter-row lock. Each block now keeps its bytes, filled here for the blocks stored, and
    // the sum walks the index on (tenant_id, value_bytes) instead of every block's row.
    up: `
ALTER TABLE memory_core_blocks ADD COLUMN IF NOT EXISTS value_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE memory_core_blocks SET value_bytes = ${postgresBytes("value")} WHERE value_bytes <> ${postgresBytes("value")};
CREATE INDEX IF NOT EXISTS memory_core_blocks_bytes ON memory_core_blocks(tenant_id, value_bytes);
`,
  },
  {
    version: 15,
    name: "no metadata and empty metadata cost nothing",
    // ADR 0559: a row without metadata (its `{}`) is charged 0 bytes, not 2, so a tenant at its
    // metadata limit can still store what carries none. Rows charged for `{}` before (by a write or by
    // migration 13) keep 0 from now on, and each tenant's counter is counted again from its rows.
    up: `
UPDATE memory_history SET metadata_bytes = 0 WHERE metadata = '{}'::jsonb AND metadata_bytes <> 0;
UPDATE memory_events SET metadata_bytes = 0 WHERE metadata = '{}'::jsonb AND metadata_bytes <> 0;
UPDATE memory_documents SET metadata_bytes = 0 WHERE metadata = '{}'::jsonb AND metadata_bytes <> 0;
${fillUsageSql(postgresBytes, undefined, postgresMetadataBytes)};
`,
  },
  {
    version: 16,
    name: "metadata the service writes itself costs nothing",
    // ADR 0563: only what a caller sent is charged. An event's episode carries the speaker and role the
    // service wrote, an import's event the job, conversation and turn: their rows are charged nothing
    // from now on, and each memory keeps its current charge, which a change keeping the metadata keeps.
    up: `
ALTER TABLE memory_memories ADD COLUMN IF NOT EXISTS metadata_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE memory_history AS h SET metadata_bytes = 0
  FROM memory_memories AS m, memory_history AS c
  WHERE h.metadata_bytes <> 0 AND m.tenant_id = h.tenant_id AND m.id = h.memory_id
    AND c.tenant_id = h.tenant_id AND c.memory_id = h.memory_id AND c.version = 1 AND c.metadata = h.metadata
    AND ${serviceEpisodeSql.postgres};
UPDATE memory_events AS e SET metadata_bytes = 0
  WHERE e.metadata_bytes <> 0 AND e.source = 'import' AND e.metadata->>'importJobId' = e.import_job_id
    AND NOT EXISTS (SELECT 1 FROM jsonb_object_keys(e.metadata) AS k(key) WHERE k.key NOT IN (${importKeys}))
    AND EXISTS (SELECT 1 FROM memory_jobs AS j WHERE j.tenant_id = e.tenant_id AND j.id = e.import_job_id AND j.type = 'import');
UPDATE memory_memories AS m SET metadata_bytes = coalesce(
  (SELECT h.metadata_bytes FROM memory_history AS h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id ORDER BY h.version DESC LIMIT 1),
  ${postgresMetadataBytes("memory_memories")});
${fillUsageSql(postgresBytes, undefined, postgresMetadataBytes)};
`,
  },
  {
    version: 17,
    name: "novelty scan records keep no memory's text",
    // ADR 0564: a novelty scan's record names each candidate's nearest memory by id; it quoted its
    // text, which a purge of the memory's (narrower) scope left in the scan's record. Records stored
    // before drop the quoted text.
    up: `
UPDATE memory_jobs SET result = jsonb_set(result, '{results}', (
  SELECT jsonb_agg(CASE WHEN jsonb_typeof(item->'nearest') = 'object' THEN jsonb_set(item, '{nearest}', (item->'nearest') - 'content') ELSE item END ORDER BY position)
  FROM jsonb_array_elements(result->'results') WITH ORDINALITY AS items(item, position)))
WHERE type = 'novelty_scan' AND jsonb_typeof(result->'results') = 'array'
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(result->'results') AS items(item) WHERE item->'nearest' ? 'content');
`,
  },
];
