/** The scale-out store: PostgreSQL through `pg`, full-text search on generated tsvector columns. */
import { createHash } from "node:crypto";
import { migratePostgres, openPostgres } from "@tackle/storage/postgres";
import type pg from "pg";
import { scopeKey } from "../../scope/memory-scope.ts";
import type { AccessRecord, MemoryStore, StoredMemory } from "../memory-store.ts";
import {
  countsFrom,
  historyValues,
  memoryColumns,
  memoryFromRow,
  memoryValues,
  scopeCondition,
  scopeParameters,
} from "../row-codec.ts";
import { createUnitScope } from "../unit-scope.ts";
import { postgresMigrations } from "./migrations.ts";

export interface PostgresStoreOptions {
  /** A `postgres://` URL, or an existing pool (left open by `close()`). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Pool size when the store creates the pool (default 10). */
  readonly maxConnections?: number;
  /** How long a process's claim on a job lasts without a renewal (default 15 000 ms). */
  readonly jobLeaseMs?: number;
}

import { postgresRecordMethods } from "./postgres-records.ts";
import {
  bm25B,
  bm25K1,
  historyColumns,
  inList,
  insertChunk,
  mark,
  marks,
  memorySelect,
  type PostgresUnit,
  plainWords,
  type Row,
  tsQuery,
} from "./postgres-sql.ts";

export async function createPostgresStore(options: PostgresStoreOptions): Promise<MemoryStore> {
  // One pool policy (idle-connection losses reported as a process warning; the pool replaces them).
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    label: "memory",
  });
  const pool = handle.pool;
  const jobLeaseMs = options.jobLeaseMs ?? 15_000;
  try {
    // Under the migration lock; refuses (StorageError "schema_too_new") tables of a newer version.
    await migratePostgres(pool, { store: "memory", migrations: postgresMigrations });
  } catch (error) {
    await handle.close();
    throw error;
  }

  // A unit of work holds one connection in a transaction; every call made inside it runs there, and
  // a method that is a transaction of its own becomes a savepoint, one at a time.
  const units = createUnitScope<PostgresUnit>();
  /** The unit's connection when the caller is in one, else the pool. */
  const db = (): pg.Pool | pg.PoolClient => units.active()?.client ?? pool;
  const all = async (sql: string, parameters: readonly unknown[] = []) =>
    (await db().query(sql, parameters as unknown[])).rows as Row[];
  const one = async (sql: string, parameters: readonly unknown[] = []) => (await all(sql, parameters))[0];

  async function transaction<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const unit = units.active();
    if (unit !== undefined) {
      const step = unit.steps.then(async () => {
        const name = `step_${++unit.savepoints}`;
        await unit.client.query(`SAVEPOINT ${name}`);
        try {
          const result = await body(unit.client);
          await unit.client.query(`RELEASE SAVEPOINT ${name}`);
          return result;
        } catch (error) {
          await unit.client.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => undefined);
          throw error;
        }
      });
      unit.steps = step.catch(() => undefined);
      return step;
    }
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const result = await body(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  const insertMemorySql = `INSERT INTO memories (${memoryColumns.join(", ")}) VALUES (${marks(1, memoryColumns.length)}) ON CONFLICT DO NOTHING`;

  async function historyInsert(client: pg.PoolClient, memory: StoredMemory, change: string, reason?: string) {
    await client.query(
      `INSERT INTO memory_history (${historyColumns.join(", ")}) VALUES (${marks(1, historyColumns.length)})`,
      historyValues(memory, change, reason),
    );
  }

  async function writeAccess(client: pg.PoolClient, tenantId: string, access: AccessRecord) {
    const day = access.at.slice(0, 10);
    const ids = access.memoryIds.length > 0 ? access.memoryIds : [null];
    await client.query(
      `INSERT INTO access_log (tenant_id, user_id, agent_id, session_id, kind, memory_id, day)
       SELECT $1, $2, $3, $4, $5, memory_id, $6 FROM unnest($7::text[]) AS memory_id`,
      [tenantId, ...scopeParameters(access.scope), access.kind, day, ids],
    );
    if (access.kind !== "search" && access.memoryIds.length > 0) {
      await client.query(
        "UPDATE memories SET access_count = access_count + 1, last_accessed_at = $1 WHERE tenant_id = $2 AND id = ANY($3)",
        [access.at, tenantId, [...access.memoryIds]],
      );
    }
  }

  /** Inserts, or answers the active duplicate (same scope and dedupe key); inside a transaction. */
  async function insertOne(
    client: pg.PoolClient,
    memory: StoredMemory,
  ): Promise<{ memory: StoredMemory; created: boolean }> {
    const result = await client.query(insertMemorySql, memoryValues(memory, scopeKey(memory)));
    if (result.rowCount === 1) {
      await historyInsert(client, memory, "create");
      return { memory, created: true };
    }
    const existing = (
      await client.query(
        "SELECT * FROM memories WHERE tenant_id = $1 AND scope_key = $2 AND dedupe_key = $3 AND status = 'active'",
        [memory.tenantId, scopeKey(memory), memory.dedupeKey],
      )
    ).rows[0];
    if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
    return { memory: memoryFromRow(existing), created: false };
  }

  const store: MemoryStore = {
    kind: "postgres",

    async close() {
      await handle.close();
    },

    async withTransaction(body) {
      if (units.active() !== undefined) return body();
      const client = await pool.connect();
      const unit: PostgresUnit = {
        client,
        done: false,
        afterCommit: [],
        steps: Promise.resolve(),
        savepoints: 0,
      };
      let committed = false;
      let broken: Error | undefined;
      try {
        await client.query("BEGIN");
        const result = await units.run(unit, body);
        await client.query("COMMIT");
        committed = true;
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch((rollbackError: unknown) => {
          broken = rollbackError as Error;
        });
        throw error;
      } finally {
        units.finish(unit, committed);
        // A connection whose rollback failed is broken: the pool drops it instead of reusing it.
        client.release(broken);
      }
    },

    afterCommit: units.afterCommit,

    async insertMemory(memory) {
      return transaction((client) => insertOne(client, memory));
    },

    async insertMemories(memories) {
      if (memories.length === 0) return [];
      return transaction(async (client) => {
        // A few statements for the whole batch (a round trip per row held writes to ~100 rows/s on a
        // loaded machine): multi-row inserts, then the history rows of those inserted in one more.
        const created = new Set<string>();
        for (let from = 0; from < memories.length; from += insertChunk) {
          const chunk = memories.slice(from, from + insertChunk);
          const values = chunk.flatMap((memory) => memoryValues(memory, scopeKey(memory)));
          const rows = chunk.map(
            (_, index) => `(${marks(index * memoryColumns.length + 1, memoryColumns.length)})`,
          );
          const result = await client.query(
            `INSERT INTO memories (${memoryColumns.join(", ")}) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING RETURNING id`,
            values,
          );
          for (const row of result.rows) created.add(String(row.id));
        }
        const fresh = memories.filter((memory) => created.has(memory.id));
        for (let from = 0; from < fresh.length; from += insertChunk) {
          const chunk = fresh.slice(from, from + insertChunk);
          const values = chunk.flatMap((memory) => historyValues(memory, "create", undefined));
          const rows = chunk.map(
            (_, index) => `(${marks(index * historyColumns.length + 1, historyColumns.length)})`,
          );
          await client.query(
            `INSERT INTO memory_history (${historyColumns.join(", ")}) VALUES ${rows.join(", ")}`,
            values,
          );
        }
        const results = [];
        for (const memory of memories) {
          if (created.has(memory.id)) {
            results.push({ memory, created: true });
            continue;
          }
          // Not inserted: the active memory of its scope and dedupe key answers (as `insertOne` does).
          const existing = (
            await client.query(
              "SELECT * FROM memories WHERE tenant_id = $1 AND scope_key = $2 AND dedupe_key = $3 AND status = 'active'",
              [memory.tenantId, scopeKey(memory), memory.dedupeKey],
            )
          ).rows[0];
          if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
          results.push({ memory: memoryFromRow(existing), created: false });
        }
        return results;
      });
    },

    async getMemories(tenantId, ids) {
      if (ids.length === 0) return [];
      return (
        await all("SELECT * FROM memories WHERE tenant_id = $1 AND id = ANY($2)", [tenantId, [...ids]])
      ).map(memoryFromRow);
    },

    async neighbourMemories(tenantId, ids, window) {
      if (ids.length === 0 || window <= 0) return new Map();
      // One statement for every anchor: the nearest active rows of its scope before and after it,
      // each an ordered range of the (tenant_id, scope_key, seq) index of active rows (migration 3).
      const rows = await all(
        `SELECT a.id AS anchor_id, n.offset_from_anchor, ${memorySelect}
         FROM memories a
         CROSS JOIN LATERAL (
           (SELECT b.seq, -row_number() OVER (ORDER BY b.seq DESC) AS offset_from_anchor FROM memories b
             WHERE b.tenant_id = a.tenant_id AND b.scope_key = a.scope_key AND b.status = 'active' AND b.seq < a.seq
             ORDER BY b.seq DESC LIMIT $3)
           UNION ALL
           (SELECT c.seq, row_number() OVER (ORDER BY c.seq) FROM memories c
             WHERE c.tenant_id = a.tenant_id AND c.scope_key = a.scope_key AND c.status = 'active' AND c.seq > a.seq
             ORDER BY c.seq LIMIT $3)) n
         JOIN memories m ON m.seq = n.seq
         WHERE a.tenant_id = $1 AND a.id = ANY($2)
         ORDER BY a.id, n.offset_from_anchor`,
        [tenantId, [...ids], window],
      );
      const found = new Map<string, { memory: StoredMemory; offset: number }[]>();
      for (const row of rows) {
        const id = String(row.anchor_id);
        const list = found.get(id) ?? [];
        list.push({ memory: memoryFromRow(row), offset: Number(row.offset_from_anchor) });
        found.set(id, list);
      }
      return found;
    },

    async updateMemory(tenantId, next, expectedVersion, note) {
      return transaction(async (client) => {
        const values = memoryValues(next, scopeKey(next)).slice(2);
        const assignments = memoryColumns.slice(2).map((column, index) => `${column} = $${index + 1}`);
        const base = values.length;
        const result = await client.query(
          `UPDATE memories SET ${assignments.join(", ")} WHERE tenant_id = $${base + 1} AND id = $${base + 2} AND version = $${base + 3}`,
          [...values, tenantId, next.id, expectedVersion],
        );
        if (result.rowCount !== 1) return false;
        await historyInsert(client, next, note.change, note.reason);
        return true;
      });
    },

    async memoryHistory(tenantId, id) {
      const rows = await all(
        "SELECT * FROM memory_history WHERE tenant_id = $1 AND memory_id = $2 ORDER BY version",
        [tenantId, id],
      );
      return rows.map((row) => ({
        version: Number(row.version),
        change: row.change as never,
        kind: row.kind as never,
        content: String(row.content),
        metadata: row.metadata as Record<string, unknown>,
        status: row.status as never,
        importance: Number(row.importance),
        ...(row.reason === null ? {} : { reason: String(row.reason) }),
        at: String(row.at),
      }));
    },

    async listMemories(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT ${memorySelect} FROM memories m WHERE m.tenant_id = $1${scopeCondition(scope, parameters, mark, "m.")}`;
      if (listOptions.statuses) sql += ` AND m.status IN (${inList(listOptions.statuses, parameters)})`;
      if (listOptions.kinds) sql += ` AND m.kind IN (${inList(listOptions.kinds, parameters)})`;
      if (listOptions.beforeId !== undefined) {
        parameters.push(listOptions.beforeId);
        sql += ` AND m.seq < (SELECT b.seq FROM memories b WHERE b.tenant_id = $1 AND b.id = $${parameters.length})`;
      }
      const order = {
        recent: "m.updated_at DESC, m.seq DESC",
        accessed: "m.access_count DESC, m.seq DESC",
        importance: "m.importance DESC, m.seq DESC",
        written: "m.seq DESC",
      }[listOptions.order];
      parameters.push(listOptions.limit);
      return (await all(`${sql} ORDER BY ${order} LIMIT $${parameters.length}`, parameters)).map(
        memoryFromRow,
      );
    },

    async memoryGeneration(tenantId) {
      const row = await one("SELECT generation FROM memory_generations WHERE tenant_id = $1", [tenantId]);
      return row === undefined ? 0 : String(row.generation);
    },

    async searchMemories(tenantId, scope, terms, searchOptions) {
      const query = tsQuery(terms);
      if (query.length === 0) return [];
      // BM25 computed in SQL, as FTS5 does on SQLite (ts_rank has no inverse document frequency, so
      // a word every memory shares counted as much as a rare name). Document frequency is exact:
      // every memory holding a query lexeme is in the OR match. The scope's size is counted up to
      // 10,000 rows (bounded cost; past that the IDF barely moves); the average length is the matched
      // memories' (FTS5 uses the whole table's).
      const exact = plainWords(terms.filter((term) => !term.endsWith("*")));
      const prefixes = plainWords(terms.filter((term) => term.endsWith("*")));
      const parameters: unknown[] = [query, tenantId, exact.join(" "), prefixes.join(" ")];
      const filters = (alias: string) => {
        let sql = `${alias}.tenant_id = $2 AND ${alias}.status = 'active'${scopeCondition(scope, parameters, mark, `${alias}.`)}`;
        if (searchOptions.kinds) sql += ` AND ${alias}.kind IN (${inList(searchOptions.kinds, parameters)})`;
        return sql;
      };
      // A query term is a lexeme (matched exactly) or a prefix (matching every lexeme it starts), each
      // stemmed as to_tsquery stems it; tf and df are counted per query term, as FTS5 counts a prefix.
      const sql = `WITH query AS (SELECT to_tsquery('english', $1) AS q),
        terms AS (
          SELECT term, false AS prefix FROM unnest(tsvector_to_array(to_tsvector('english', $3))) term
          UNION SELECT term, true FROM unnest(tsvector_to_array(to_tsvector('english', $4))) term),
        scope_size AS (
          SELECT count(*)::float8 AS n FROM (SELECT 1 FROM memories s WHERE ${filters("s")} LIMIT 10000) capped),
        matched AS (
          SELECT m.seq, m.tsv, greatest(length(m.tsv), 1)::float8 AS dl FROM memories m, query
          WHERE ${filters("m")} AND m.tsv @@ query.q),
        average AS (SELECT avg(dl) AS avgdl FROM matched),
        hits AS (
          SELECT matched.seq, matched.dl, terms.term, sum(coalesce(array_length(t.positions, 1), 1))::float8 AS tf
          FROM matched CROSS JOIN LATERAL unnest(matched.tsv) t
          JOIN terms ON CASE WHEN terms.prefix THEN starts_with(t.lexeme, terms.term) ELSE t.lexeme = terms.term END
          GROUP BY matched.seq, matched.dl, terms.term),
        frequency AS (SELECT term, count(*)::float8 AS df FROM hits GROUP BY term),
        scored AS (
          SELECT hits.seq, sum(
            ln(1 + (greatest(scope_size.n, frequency.df) - frequency.df + 0.5) / (frequency.df + 0.5))
            * hits.tf * ${bm25K1 + 1} / (hits.tf + ${bm25K1} * (${1 - bm25B} + ${bm25B} * hits.dl / average.avgdl))) AS score
          FROM hits JOIN frequency USING (term), scope_size, average GROUP BY hits.seq)
        SELECT ${memorySelect}, scored.score FROM scored JOIN memories m ON m.seq = scored.seq`;
      parameters.push(searchOptions.limit);
      const text = `${sql} ORDER BY scored.score DESC, m.seq DESC LIMIT $${parameters.length}`;
      // A named statement: parsed once per connection (the text varies only with the scope's fields
      // and the kinds' count), which saves about as much as the query itself takes on a small scope.
      const name = `memory-search-${createHash("sha256").update(text).digest("hex").slice(0, 16)}`;
      const rows = (await db().query({ name, text, values: parameters })).rows as Row[];
      return rows.map((row) => ({ memory: memoryFromRow(row), score: Number(row.score) }));
    },

    async candidateMemories(tenantId, scope, queries, candidateOptions) {
      const found: StoredMemory[][] = queries.map(() => []);
      const asked = queries
        .map((query, index) => ({ text: tsQuery(query.terms, query.every), index }))
        .filter((query) => query.text.length > 0);
      if (asked.length === 0) return found;
      // One statement for the batch: each query's best matches by ts_rank, a lateral read of the index.
      const parameters: unknown[] = [
        tenantId,
        asked.map((query) => query.text),
        asked.map((query) => query.index),
        candidateOptions.limit,
      ];
      let filters = `m.tenant_id = $1 AND m.status = 'active'${scopeCondition(scope, parameters, mark, "m.")}`;
      if (candidateOptions.kinds) filters += ` AND m.kind IN (${inList(candidateOptions.kinds, parameters)})`;
      const rows = await all(
        `SELECT q.query_index, ${memorySelect}
         FROM unnest($2::text[], $3::int[]) AS q(query, query_index)
         CROSS JOIN LATERAL (
           SELECT m.*, ts_rank(m.tsv, tq) AS rank FROM memories m, to_tsquery('english', q.query) tq
           WHERE ${filters} AND m.tsv @@ tq ORDER BY rank DESC, m.seq DESC LIMIT $4) m
         ORDER BY q.query_index, m.rank DESC, m.seq DESC`,
        parameters,
      );
      for (const row of rows) found[Number(row.query_index)]!.push(memoryFromRow(row));
      return found;
    },

    async embeddedMemories(tenantId, scope, kinds) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT ${memorySelect} FROM memories m WHERE m.tenant_id = $1 AND m.status = 'active' AND m.embedding IS NOT NULL${scopeCondition(scope, parameters, mark, "m.")}`;
      if (kinds) sql += ` AND m.kind IN (${inList(kinds, parameters)})`;
      return (await all(sql, parameters)).map(memoryFromRow);
    },

    async countMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      return countsFrom(
        await all(
          `SELECT status, kind, COUNT(*) AS n FROM memories WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)} GROUP BY status, kind`,
          parameters,
        ),
      );
    },

    async countAccessedMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const rows = await all(
        `SELECT COUNT(*) AS n FROM memories WHERE tenant_id = $1 AND status = 'active' AND access_count > 0${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(rows[0]?.n ?? 0);
    },

    async recordAccess(tenantId, access) {
      await transaction((client) => writeAccess(client, tenantId, access));
    },

    async accessTrends(tenantId, scope, sinceDay) {
      const parameters: unknown[] = [tenantId, sinceDay];
      const rows = await all(
        `SELECT day, COUNT(*) FILTER (WHERE kind = 'search') AS searches, COUNT(*) FILTER (WHERE kind = 'hit') AS hits,
           COUNT(*) FILTER (WHERE kind = 'read') AS reads
         FROM access_log WHERE tenant_id = $1 AND day >= $2${scopeCondition(scope, parameters, mark)} GROUP BY day ORDER BY day`,
        parameters,
      );
      return rows.map((row) => ({
        day: String(row.day),
        searches: Number(row.searches),
        hits: Number(row.hits),
        reads: Number(row.reads),
      }));
    },

    async countSearches(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COUNT(*) AS n FROM access_log WHERE tenant_id = $1 AND kind = 'search'${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    ...postgresRecordMethods({ pool, db, all, one, transaction, units, writeAccess, jobLeaseMs }),
  };
  return store;
}
