/** The embedded store: one SQLite file through `node:sqlite`, BM25 through FTS5. */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { scopeKey } from "../../scope/memory-scope.ts";
import type { AccessRecord, MemoryStore, StoredEvent, StoredMemory } from "../memory-store.ts";
import {
  blockFromRow,
  countsFrom,
  documentFromRow,
  eventFromRow,
  historyValues,
  idempotencyFromRow,
  jobFromRow,
  memoryColumns,
  memoryFromRow,
  memoryValues,
  scopeCondition,
  scopeParameters,
  traceFromRow,
} from "../row-codec.ts";
import { sqliteMigrations } from "./migrations.ts";
import { purgeSqliteScope } from "./purge-sqlite-scope.ts";
import { scoreWithScopeStatistics } from "./scope-bm25.ts";
import { anyWord, scopedMatch, scopeTokens } from "./scope-tokens.ts";
import { withSqliteUnitsOfWork } from "./sqlite-unit-of-work.ts";

/** Prepared statements kept per store (texts vary with the length of IN lists; past this, all are dropped). */
const maximumCachedStatements = 256;
/** How many of a scope's best index matches are rescored with the scope's statistics. */
const candidateCap = 1000;
/** The scope's size is counted up to this many memories (as on PostgreSQL; past it the IDF barely moves). */
const scopeSizeCap = 10_000;

export interface SqliteStoreOptions {
  /** A file path, or `:memory:` for a throwaway store. */
  readonly path: string;
}

type Row = Record<string, unknown>;
const mark = () => "?";

function inList(values: readonly unknown[], parameters: unknown[]): string {
  parameters.push(...values);
  return values.map(() => "?").join(", ");
}

export function createSqliteStore(options: SqliteStoreOptions): MemoryStore {
  // Refuses (StorageError "schema_too_new") a file written by a newer version of this store.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: "normal",
    store: "memory",
    migrations: sqliteMigrations,
  });
  backfillSearchIndex(database);

  // Statements are prepared once per text: a search runs the same few statements many times (the
  // neighbouring-turn lookup two per anchor), and preparing one costs more than running it.
  const statements = new Map<string, StatementSync>();
  const prepare = (sql: string): StatementSync => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      if (statements.size >= maximumCachedStatements) statements.clear();
      statement = database.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
  const all = (sql: string, parameters: readonly unknown[]): Row[] =>
    prepare(sql).all(...(parameters as SQLInputValue[])) as Row[];
  const get = (sql: string, parameters: readonly unknown[]): Row | undefined =>
    prepare(sql).get(...(parameters as SQLInputValue[])) as Row | undefined;
  const run = (sql: string, parameters: readonly unknown[]) =>
    prepare(sql).run(...(parameters as SQLInputValue[]));

  const transaction = <T>(body: () => T): T => sqliteTransaction(database, body);

  const insertColumns = [...memoryColumns, "scope_tokens"];
  const insertMemorySql = `INSERT INTO memories (${insertColumns.join(", ")}) VALUES (${insertColumns
    .map(mark)
    .join(", ")}) ON CONFLICT DO NOTHING`;

  /** Appends an event, or answers the one already stored under its custom id; inside a transaction. */
  function appendOne(event: Omit<StoredEvent, "seq">): { event: StoredEvent; created: boolean } {
    const result = run(
      `INSERT INTO events (id, tenant_id, custom_id, role, content, user_id, agent_id, session_id, metadata, source, import_job_id, occurred_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        event.id,
        event.tenantId,
        event.customId ?? null,
        event.role,
        event.content,
        ...scopeParameters(event),
        JSON.stringify(event.metadata),
        event.source,
        event.importJobId ?? null,
        event.occurredAt,
        event.createdAt,
      ],
    );
    const row =
      result.changes === 1
        ? get("SELECT * FROM events WHERE tenant_id = ? AND id = ?", [event.tenantId, event.id])
        : get("SELECT * FROM events WHERE tenant_id = ? AND custom_id = ?", [
            event.tenantId,
            event.customId ?? null,
          ]);
    if (!row) throw new Error(`event ${event.id} was neither inserted nor found by its custom id`);
    return { event: eventFromRow(row), created: result.changes === 1 };
  }

  function historyInsert(memory: StoredMemory, change: string, reason: string | undefined) {
    run(
      `INSERT INTO memory_history (tenant_id, memory_id, version, change, kind, content, metadata, status, importance, reason, at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      historyValues(memory, change, reason),
    );
  }

  function writeAccess(tenantId: string, access: AccessRecord) {
    const day = access.at.slice(0, 10);
    const scopeValues = scopeParameters(access.scope);
    const ids = access.memoryIds.length > 0 ? access.memoryIds : [null];
    for (const memoryId of ids) {
      run(
        "INSERT INTO access_log (tenant_id, user_id, agent_id, session_id, kind, memory_id, day) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [tenantId, ...scopeValues, access.kind, memoryId, day],
      );
    }
    if (access.kind !== "search" && access.memoryIds.length > 0) {
      // `+tenant_id` keeps the planner on the id index (it otherwise walks the tenant's rows).
      const parameters: unknown[] = [access.at, tenantId];
      run(
        `UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE +tenant_id = ? AND id IN (${inList(access.memoryIds, parameters)})`,
        parameters,
      );
    }
  }

  /** Inserts, or answers the active duplicate (same scope and dedupe key); inside a transaction. */
  function insertOne(memory: StoredMemory): { memory: StoredMemory; created: boolean } {
    const result = run(insertMemorySql, [
      ...memoryValues(memory, scopeKey(memory)),
      scopeTokens(memory.tenantId, memory).join(" "),
    ]);
    if (result.changes === 1) {
      historyInsert(memory, "create", undefined);
      return { memory, created: true };
    }
    const existing = get(
      "SELECT * FROM memories WHERE tenant_id = ? AND scope_key = ? AND dedupe_key = ? AND status = 'active'",
      [memory.tenantId, scopeKey(memory), memory.dedupeKey],
    );
    if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
    return { memory: memoryFromRow(existing), created: false };
  }

  const store: Omit<MemoryStore, "withTransaction" | "afterCommit"> = {
    kind: "sqlite",

    async close() {
      if (database.isOpen) database.close();
    },

    async insertMemory(memory) {
      return transaction(() => insertOne(memory));
    },

    async insertMemories(memories) {
      return transaction(() => memories.map(insertOne));
    },

    async getMemories(tenantId, ids) {
      if (ids.length === 0) return [];
      const parameters: unknown[] = [tenantId];
      // `+tenant_id`: the planner otherwise walks the tenant's rows instead of the id index.
      const rows = all(
        `SELECT * FROM memories WHERE +tenant_id = ? AND id IN (${inList(ids, parameters)})`,
        parameters,
      );
      return rows.map(memoryFromRow);
    },

    async neighbourMemories(tenantId, ids, window) {
      if (ids.length === 0 || window <= 0) return new Map();
      // One statement: per anchor, the positions of the nearest active rows of its scope before and
      // after it, each an ordered range of the (tenant_id, scope_key, seq) index of active rows
      // (migration 2): a few rows read, however many other scopes' rows were written in between.
      const parameters: unknown[] = [window, window, tenantId];
      const anchors = all(
        `SELECT a.id,
           (SELECT group_concat(seq) FROM (SELECT b.seq FROM memories b WHERE b.tenant_id = a.tenant_id
              AND b.scope_key = a.scope_key AND b.status = 'active' AND b.seq < a.seq ORDER BY b.seq DESC LIMIT ?)) AS before,
           (SELECT group_concat(seq) FROM (SELECT c.seq FROM memories c WHERE c.tenant_id = a.tenant_id
              AND c.scope_key = a.scope_key AND c.status = 'active' AND c.seq > a.seq ORDER BY c.seq LIMIT ?)) AS after
         FROM memories a WHERE +a.tenant_id = ? AND a.id IN (${inList(ids, parameters)})`,
        parameters,
      );
      const positions = (list: unknown) =>
        list === null || list === undefined
          ? []
          : String(list)
              .split(",")
              .map(Number)
              .sort((left, right) => left - right);
      // Each neighbouring row is then read and decoded once, however many anchors it is next to (the
      // anchors of a search are often adjacent turns).
      const windows = anchors.map((anchor) => {
        const before = positions(anchor.before);
        const after = positions(anchor.after);
        return {
          id: String(anchor.id),
          around: [
            ...before.map((seq, index) => ({ seq, offset: index - before.length })),
            ...after.map((seq, index) => ({ seq, offset: index + 1 })),
          ],
        };
      });
      const wanted: unknown[] = [];
      const seqs = [...new Set(windows.flatMap((entry) => entry.around.map((item) => item.seq)))];
      const rows =
        seqs.length === 0 ? [] : all(`SELECT * FROM memories WHERE seq IN (${inList(seqs, wanted)})`, wanted);
      const bySeq = new Map(rows.map((row) => [Number(row.seq), memoryFromRow(row)]));
      const found = new Map<string, { memory: StoredMemory; offset: number }[]>();
      for (const { id, around } of windows) {
        found.set(
          id,
          around.flatMap(({ seq, offset }) => {
            const memory = bySeq.get(seq);
            return memory ? [{ memory, offset }] : [];
          }),
        );
      }
      return found;
    },

    async updateMemory(tenantId, next, expectedVersion, note) {
      return transaction(() => {
        const values = memoryValues(next, scopeKey(next));
        const assignments = memoryColumns.slice(2).map((column) => `${column} = ?`);
        const result = run(
          `UPDATE memories SET ${assignments.join(", ")} WHERE tenant_id = ? AND id = ? AND version = ?`,
          [...values.slice(2), tenantId, next.id, expectedVersion],
        );
        if (result.changes !== 1) return false;
        historyInsert(next, note.change, note.reason);
        return true;
      });
    },

    async memoryHistory(tenantId, id) {
      const rows = all(
        "SELECT * FROM memory_history WHERE tenant_id = ? AND memory_id = ? ORDER BY version",
        [tenantId, id],
      );
      return rows.map((row) => ({
        version: Number(row.version),
        change: row.change as never,
        kind: row.kind as never,
        content: String(row.content),
        metadata: JSON.parse(String(row.metadata)),
        status: row.status as never,
        importance: Number(row.importance),
        ...(row.reason === null ? {} : { reason: String(row.reason) }),
        at: String(row.at),
      }));
    },

    async listMemories(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memories WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.statuses) sql += ` AND status IN (${inList(listOptions.statuses, parameters)})`;
      if (listOptions.kinds) sql += ` AND kind IN (${inList(listOptions.kinds, parameters)})`;
      if (listOptions.beforeId !== undefined) {
        sql += " AND seq < (SELECT seq FROM memories WHERE tenant_id = ? AND id = ?)";
        parameters.push(tenantId, listOptions.beforeId);
      }
      const order = {
        recent: "updated_at DESC, seq DESC",
        accessed: "access_count DESC, seq DESC",
        importance: "importance DESC, seq DESC",
        written: "seq DESC",
      }[listOptions.order];
      parameters.push(listOptions.limit);
      return all(`${sql} ORDER BY ${order} LIMIT ?`, parameters).map(memoryFromRow);
    },

    async memoryGeneration(tenantId) {
      // As text: random() fills all 64 bits, past what a JavaScript number holds exactly.
      const row = get(
        "SELECT CAST(generation AS TEXT) AS generation FROM memory_generations WHERE tenant_id = ?",
        [tenantId],
      );
      return row === undefined ? 0 : String(row.generation);
    },

    async searchMemories(tenantId, scope, terms, searchOptions) {
      // The index narrows by the scope's tokens; the SQL conditions below still decide (a token is a hash).
      const match = scopedMatch(tenantId, scope, terms, searchOptions.every === true);
      if (match.length === 0) return [];
      const parameters: unknown[] = [match, tenantId];
      let filters = `m.tenant_id = ? AND m.status = 'active'${scopeCondition(scope, parameters, mark, "m.")}`;
      if (searchOptions.kinds) filters += ` AND m.kind IN (${inList(searchOptions.kinds, parameters)})`;
      const filterParameters = parameters.slice(1);
      if (searchOptions.order === "candidates") {
        return all(
          `SELECT m.*, -bm25(memories_search, 1.0, 0.0) AS score FROM memories_search JOIN memories m ON m.seq = memories_search.rowid
           WHERE memories_search MATCH ? AND ${filters} ORDER BY bm25(memories_search, 1.0, 0.0) LIMIT ?`,
          [...parameters, searchOptions.limit],
        ).map((row) => ({ memory: memoryFromRow(row), score: Number(row.score) }));
      }
      // The index pre-selects (its own table-wide order matters only past `candidateCap` matches in
      // the scope); BM25 is then computed over the scope's statistics alone (scope-bm25.ts). Only the
      // candidates' text is read for that; whole rows only for the `limit` best.
      // The index's own ranking is computed only when the scope holds more matches than are rescored.
      const select = `SELECT m.seq, m.content FROM memories_search JOIN memories m ON m.seq = memories_search.rowid
         WHERE memories_search MATCH ? AND ${filters}`;
      let matches = all(`${select} LIMIT ${candidateCap + 1}`, parameters);
      if (matches.length > candidateCap) {
        matches = all(`${select} ORDER BY bm25(memories_search, 1.0, 0.0) LIMIT ${candidateCap}`, parameters);
      }
      const rows = (matches as { seq: number; content: string }[]).sort(
        (left, right) => Number(right.seq) - Number(left.seq),
      );
      const size = get(
        `SELECT COUNT(*) AS n FROM (SELECT 1 FROM memories m WHERE ${filters} LIMIT ${scopeSizeCap})`,
        filterParameters,
      );
      let documentFrequency: Map<string, number> | undefined;
      if (rows.length >= candidateCap) {
        documentFrequency = new Map();
        for (const term of new Set(terms)) {
          const termMatch = scopedMatch(tenantId, scope, [term]);
          if (termMatch.length === 0) continue;
          const counted = get(
            `SELECT COUNT(*) AS n FROM memories_search JOIN memories m ON m.seq = memories_search.rowid
             WHERE memories_search MATCH ? AND ${filters}`,
            [termMatch, ...filterParameters],
          );
          documentFrequency.set(term, Number(counted?.n ?? 0));
        }
      }
      const best = scoreWithScopeStatistics(rows, terms, {
        documents: Number(size?.n ?? 0),
        ...(documentFrequency ? { documentFrequency } : {}),
      }).slice(0, searchOptions.limit);
      const seqs: unknown[] = [];
      const full = new Map(
        all(
          `SELECT * FROM memories WHERE seq IN (${inList(
            best.map(({ item }) => item.seq),
            seqs,
          )})`,
          seqs,
        ).map((row) => [Number(row.seq), memoryFromRow(row)]),
      );
      return best.map(({ item, score }) => ({ memory: full.get(Number(item.seq))!, score }));
    },

    async candidateMemories(tenantId, scope, queries, candidateOptions) {
      // In process, so one query at a time costs no round trip.
      const found: StoredMemory[][] = [];
      for (const query of queries) {
        const hits = await store.searchMemories(tenantId, scope, query.terms, {
          limit: candidateOptions.limit,
          every: query.every,
          order: "candidates",
          ...(candidateOptions.kinds ? { kinds: candidateOptions.kinds } : {}),
        });
        found.push(hits.map((hit) => hit.memory));
      }
      return found;
    },

    async embeddedMemories(tenantId, scope, kinds) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memories WHERE tenant_id = ? AND status = 'active' AND embedding IS NOT NULL${scopeCondition(scope, parameters, mark)}`;
      if (kinds) sql += ` AND kind IN (${inList(kinds, parameters)})`;
      return all(sql, parameters).map(memoryFromRow);
    },

    async countMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const rows = all(
        `SELECT status, kind, COUNT(*) AS n FROM memories WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)} GROUP BY status, kind`,
        parameters,
      );
      return countsFrom(rows);
    },

    async countAccessedMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = get(
        `SELECT COUNT(*) AS n FROM memories WHERE tenant_id = ? AND status = 'active' AND access_count > 0${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    async recordAccess(tenantId, access) {
      transaction(() => writeAccess(tenantId, access));
    },

    async accessTrends(tenantId, scope, sinceDay) {
      const parameters: unknown[] = [tenantId, sinceDay];
      const rows = all(
        `SELECT day, SUM(kind = 'search') AS searches, SUM(kind = 'hit') AS hits, SUM(kind = 'read') AS reads
         FROM access_log WHERE tenant_id = ? AND day >= ?${scopeCondition(scope, parameters, mark)} GROUP BY day ORDER BY day`,
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
      const row = get(
        `SELECT COUNT(*) AS n FROM access_log WHERE tenant_id = ? AND kind = 'search'${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    async appendEvent(event) {
      return transaction(() => appendOne(event));
    },

    async appendEvents(events) {
      return transaction(() => events.map(appendOne));
    },

    async listEvents(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM events WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.cursor !== undefined) {
        parameters.push(listOptions.cursor);
        sql += listOptions.order === "asc" ? " AND seq > ?" : " AND seq < ?";
      }
      parameters.push(listOptions.limit);
      return all(
        `${sql} ORDER BY seq ${listOptions.order === "asc" ? "ASC" : "DESC"} LIMIT ?`,
        parameters,
      ).map(eventFromRow);
    },

    async getEvents(tenantId, ids) {
      if (ids.length === 0) return [];
      const parameters: unknown[] = [tenantId];
      return all(
        `SELECT * FROM events WHERE tenant_id = ? AND id IN (${inList(ids, parameters)}) ORDER BY seq`,
        parameters,
      ).map(eventFromRow);
    },

    async countEvents(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      return Number(
        get(
          `SELECT COUNT(*) AS n FROM events WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`,
          parameters,
        )?.n ?? 0,
      );
    },

    async insertDocument(document, chunks) {
      return transaction(() => {
        const result = run(
          `INSERT INTO documents (id, tenant_id, user_id, agent_id, session_id, scope_key, title, source, metadata, content_hash, chunk_count, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
          [
            document.id,
            document.tenantId,
            ...scopeParameters(document),
            scopeKey(document),
            document.title,
            document.source ?? null,
            JSON.stringify(document.metadata),
            document.contentHash,
            document.chunkCount,
            document.createdAt,
          ],
        );
        if (result.changes !== 1) {
          const existing = get(
            "SELECT * FROM documents WHERE tenant_id = ? AND scope_key = ? AND content_hash = ?",
            [document.tenantId, scopeKey(document), document.contentHash],
          );
          if (!existing) throw new Error(`document ${document.id} was neither inserted nor found`);
          return { document: documentFromRow(existing), created: false };
        }
        for (const chunk of chunks) {
          run("INSERT INTO chunks (id, tenant_id, document_id, ordinal, content) VALUES (?, ?, ?, ?, ?)", [
            chunk.id,
            document.tenantId,
            document.id,
            chunk.ordinal,
            chunk.content,
          ]);
        }
        return { document, created: true };
      });
    },

    async getDocument(tenantId, id) {
      const row = get("SELECT * FROM documents WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? documentFromRow(row) : undefined;
    },

    async searchChunks(tenantId, scope, terms, limit) {
      const match = anyWord(terms);
      if (match.length === 0) return [];
      const parameters: unknown[] = [match, tenantId];
      const sql = `SELECT d.*, c.id AS chunk_id, c.ordinal AS chunk_ordinal, c.content AS chunk_content, -bm25(chunks_fts) AS score
        FROM chunks_fts JOIN chunks c ON c.seq = chunks_fts.rowid JOIN documents d ON d.id = c.document_id AND d.tenant_id = c.tenant_id
        WHERE chunks_fts MATCH ? AND c.tenant_id = ?${scopeCondition(scope, parameters, mark, "d.")}
        ORDER BY bm25(chunks_fts) LIMIT ?`;
      parameters.push(limit);
      return all(sql, parameters).map((row) => ({
        chunk: {
          id: String(row.chunk_id),
          ordinal: Number(row.chunk_ordinal),
          content: String(row.chunk_content),
        },
        document: documentFromRow(row),
        score: Number(row.score),
      }));
    },

    async countDocuments(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      return Number(
        get(
          `SELECT COUNT(*) AS n FROM documents WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`,
          parameters,
        )?.n ?? 0,
      );
    },

    async getBlocks(tenantId, scope) {
      return all("SELECT * FROM core_blocks WHERE tenant_id = ? AND scope_key = ? ORDER BY label", [
        tenantId,
        scopeKey(scope),
      ]).map(blockFromRow);
    },

    async saveBlocks(tenantId, scope, changes) {
      const key = scopeKey(scope);
      try {
        return transaction(() => {
          for (const { block, expectedVersion } of changes) {
            const result =
              expectedVersion === 0
                ? run(
                    `INSERT INTO core_blocks (tenant_id, scope_key, label, value, limit_chars, version, updated_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
                    [tenantId, key, block.label, block.value, block.limit, block.version, block.updatedAt],
                  )
                : run(
                    `UPDATE core_blocks SET value = ?, limit_chars = ?, version = ?, updated_at = ?
                     WHERE tenant_id = ? AND scope_key = ? AND label = ? AND version = ?`,
                    [
                      block.value,
                      block.limit,
                      block.version,
                      block.updatedAt,
                      tenantId,
                      key,
                      block.label,
                      expectedVersion,
                    ],
                  );
            if (result.changes !== 1) throw new BlockConflict();
          }
          return true;
        });
      } catch (error) {
        if (error instanceof BlockConflict) return false;
        throw error;
      }
    },

    async insertTrace(trace, accesses) {
      transaction(() => {
        run(
          `INSERT INTO traces (id, tenant_id, user_id, agent_id, session_id, operation, query, ranking, results, duration_ms, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            trace.id,
            trace.tenantId,
            ...scopeParameters(trace),
            trace.operation,
            trace.query,
            trace.ranking,
            JSON.stringify(trace.results),
            trace.durationMs,
            trace.createdAt,
          ],
        );
        for (const access of accesses) writeAccess(trace.tenantId, access);
      });
    },

    async getTrace(tenantId, id) {
      const row = get("SELECT * FROM traces WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? traceFromRow(row) : undefined;
    },

    async listTraces(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM traces WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.operation) {
        parameters.push(listOptions.operation);
        sql += " AND operation = ?";
      }
      parameters.push(listOptions.limit);
      return all(`${sql} ORDER BY seq DESC LIMIT ?`, parameters).map(traceFromRow);
    },

    async insertJob(job) {
      run(
        `INSERT INTO jobs (id, tenant_id, user_id, agent_id, session_id, type, status, input, result, error, created_at, started_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          job.id,
          job.tenantId,
          ...scopeParameters(job),
          job.type,
          job.status,
          JSON.stringify(job.input),
          job.result === undefined ? null : JSON.stringify(job.result),
          job.error === undefined ? null : JSON.stringify(job.error),
          job.createdAt,
          job.startedAt ?? null,
          job.finishedAt ?? null,
        ],
      );
    },

    async updateJob(job) {
      run(
        "UPDATE jobs SET status = ?, result = ?, error = ?, started_at = ?, finished_at = ? WHERE tenant_id = ? AND id = ?",
        [
          job.status,
          job.result === undefined ? null : JSON.stringify(job.result),
          job.error === undefined ? null : JSON.stringify(job.error),
          job.startedAt ?? null,
          job.finishedAt ?? null,
          job.tenantId,
          job.id,
        ],
      );
    },

    async claimJob(tenantId, id, startedAt, orphanedBefore) {
      const result = run(
        `UPDATE jobs SET status = 'running', started_at = ?
         WHERE tenant_id = ? AND id = ? AND (status = 'queued' OR (status = 'running' AND started_at < ?))`,
        [startedAt, tenantId, id, orphanedBefore],
      );
      return result.changes === 1;
    },

    async getJob(tenantId, id) {
      const row = get("SELECT * FROM jobs WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? jobFromRow(row) : undefined;
    },

    async listJobs(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM jobs WHERE tenant_id = ?${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.type) {
        parameters.push(listOptions.type);
        sql += " AND type = ?";
      }
      if (listOptions.status) {
        parameters.push(listOptions.status);
        sql += " AND status = ?";
      }
      parameters.push(listOptions.limit);
      return all(`${sql} ORDER BY seq DESC LIMIT ?`, parameters).map(jobFromRow);
    },

    async unfinishedJobs() {
      return all("SELECT * FROM jobs WHERE status IN ('queued', 'running') ORDER BY seq", []).map(jobFromRow);
    },

    async findIdempotencyKey(tenantId, key, now) {
      const row = get("SELECT * FROM idempotency_keys WHERE tenant_id = ? AND key = ? AND expires_at > ?", [
        tenantId,
        key,
        now,
      ]);
      return row ? idempotencyFromRow(row) : undefined;
    },

    async recordIdempotencyKey(record) {
      // A new key, or one whose record expired (replaced in place).
      const result = run(
        `INSERT INTO idempotency_keys (tenant_id, key, fingerprint, answer, created_at, expires_at, user_id, agent_id, session_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, answer = excluded.answer,
           created_at = excluded.created_at, expires_at = excluded.expires_at, user_id = excluded.user_id,
           agent_id = excluded.agent_id, session_id = excluded.session_id
         WHERE idempotency_keys.expires_at <= excluded.created_at`,
        [
          record.tenantId,
          record.key,
          record.fingerprint,
          record.answer,
          record.createdAt,
          record.expiresAt,
          ...scopeParameters(record.scope),
        ],
      );
      return result.changes === 1;
    },

    async sweepIdempotencyKeys(now) {
      return Number(run("DELETE FROM idempotency_keys WHERE expires_at <= ?", [now]).changes);
    },

    async purgeScope(tenantId, scope) {
      return purgeSqliteScope(database, tenantId, scope);
    },

    async counts(tenantId, scope = {}) {
      const count = (table: string, extra = "") => {
        const parameters: unknown[] = [tenantId];
        const where = `tenant_id = ?${scopeCondition(scope, parameters, mark)}${extra}`;
        return Number(get(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, parameters)?.n ?? 0);
      };
      return {
        memories: count("memories", " AND status = 'active'"),
        events: count("events"),
        documents: count("documents"),
        traces: count("traces"),
        jobs: count("jobs"),
      };
    },
  };
  return withSqliteUnitsOfWork(database, store, sqliteWrites);
}

/** The methods that write: inside a unit of work, the first of them begins its transaction. */
const sqliteWrites: ReadonlySet<string> = new Set([
  "insertMemory",
  "insertMemories",
  "updateMemory",
  "recordAccess",
  "appendEvent",
  "appendEvents",
  "insertDocument",
  "saveBlocks",
  "insertTrace",
  "insertJob",
  "updateJob",
  "claimJob",
  "recordIdempotencyKey",
  "sweepIdempotencyKeys",
  "purgeScope",
]);

class BlockConflict extends Error {}

/** Gives every memory without scope tokens its tokens and its row in the search index. */
function backfillSearchIndex(database: DatabaseSync): void {
  const missing = database
    .prepare(
      "SELECT seq, tenant_id, user_id, agent_id, session_id, content FROM memories WHERE scope_tokens = ''",
    )
    .all() as Record<string, SQLInputValue>[];
  if (missing.length === 0) return;
  const update = database.prepare("UPDATE memories SET scope_tokens = ? WHERE seq = ?");
  const index = database.prepare("INSERT INTO memories_search(rowid, content, scope) VALUES (?, ?, ?)");
  database.exec("BEGIN IMMEDIATE");
  try {
    for (const row of missing) {
      const tokens = scopeTokens(String(row.tenant_id), {
        ...(row.user_id === null ? {} : { userId: String(row.user_id) }),
        ...(row.agent_id === null ? {} : { agentId: String(row.agent_id) }),
        ...(row.session_id === null ? {} : { sessionId: String(row.session_id) }),
      }).join(" ");
      update.run(tokens, row.seq!);
      database.prepare("DELETE FROM memories_search WHERE rowid = ?").run(row.seq!);
      index.run(row.seq!, String(row.content), tokens);
    }
    database.exec("COMMIT");
  } catch (error) {
    database.exec("ROLLBACK");
    throw error;
  }
}
