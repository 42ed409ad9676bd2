/**
 * Migration 1 of the PostgreSQL store (see `migrations.ts`): the SQLite tables, with generated
 * tsvector columns and GIN indexes. Shipped: never edit it; add the next migration instead.
 */
export const postgresSchema = `
CREATE TABLE IF NOT EXISTS memories (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  scope_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  content TEXT NOT NULL,
  dedupe_key TEXT NOT NULL,
  metadata JSONB NOT NULL,
  provenance JSONB NOT NULL,
  version INTEGER NOT NULL,
  status TEXT NOT NULL,
  superseded_by TEXT,
  importance DOUBLE PRECISION NOT NULL,
  helpful INTEGER NOT NULL, unhelpful INTEGER NOT NULL,
  successes INTEGER NOT NULL, failures INTEGER NOT NULL,
  access_count INTEGER NOT NULL,
  last_accessed_at TEXT,
  embedding BYTEA,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE UNIQUE INDEX IF NOT EXISTS memories_active_dedupe
  ON memories(tenant_id, scope_key, dedupe_key) WHERE status = 'active';
CREATE INDEX IF NOT EXISTS memories_tenant_user ON memories(tenant_id, user_id);
CREATE INDEX IF NOT EXISTS memories_tenant_agent ON memories(tenant_id, agent_id);
CREATE INDEX IF NOT EXISTS memories_tenant_session ON memories(tenant_id, session_id);
CREATE INDEX IF NOT EXISTS memories_tenant_updated ON memories(tenant_id, updated_at);
CREATE INDEX IF NOT EXISTS memories_tsv ON memories USING GIN (tsv);

CREATE TABLE IF NOT EXISTS memory_history (
  tenant_id TEXT NOT NULL,
  memory_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  change TEXT NOT NULL,
  kind TEXT NOT NULL,
  content TEXT NOT NULL,
  metadata JSONB NOT NULL,
  status TEXT NOT NULL,
  importance DOUBLE PRECISION NOT NULL,
  reason TEXT,
  at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, memory_id, version)
);

CREATE TABLE IF NOT EXISTS access_log (
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  kind TEXT NOT NULL,
  memory_id TEXT,
  day TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS access_log_tenant_day ON access_log(tenant_id, day);

CREATE TABLE IF NOT EXISTS events (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  custom_id TEXT,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  metadata JSONB NOT NULL,
  source TEXT NOT NULL,
  import_job_id TEXT,
  occurred_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_custom_id ON events(tenant_id, custom_id) WHERE custom_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_tenant_session ON events(tenant_id, session_id, seq);

CREATE TABLE IF NOT EXISTS documents (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  scope_key TEXT NOT NULL,
  title TEXT NOT NULL,
  source TEXT,
  metadata JSONB NOT NULL,
  content_hash TEXT NOT NULL,
  chunk_count INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, scope_key, content_hash)
);
CREATE TABLE IF NOT EXISTS chunks (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  document_id TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  content TEXT NOT NULL,
  tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX IF NOT EXISTS chunks_tsv ON chunks USING GIN (tsv);

CREATE TABLE IF NOT EXISTS core_blocks (
  tenant_id TEXT NOT NULL,
  scope_key TEXT NOT NULL,
  label TEXT NOT NULL,
  value TEXT NOT NULL,
  limit_chars INTEGER NOT NULL,
  version INTEGER NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, scope_key, label)
);

CREATE TABLE IF NOT EXISTS traces (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  operation TEXT NOT NULL,
  query TEXT NOT NULL,
  ranking TEXT NOT NULL,
  results JSONB NOT NULL,
  duration_ms DOUBLE PRECISION NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_tenant ON traces(tenant_id, seq);

CREATE TABLE IF NOT EXISTS jobs (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  user_id TEXT, agent_id TEXT, session_id TEXT,
  type TEXT NOT NULL,
  status TEXT NOT NULL,
  input JSONB NOT NULL,
  result JSONB,
  error JSONB,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT
);
CREATE INDEX IF NOT EXISTS jobs_tenant ON jobs(tenant_id, seq);
`;
