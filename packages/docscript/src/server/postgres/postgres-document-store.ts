/** The scale-out document store: PostgreSQL through `pg`, the same update log and snapshots as SQLite. */
import { migratePostgres, openPostgres, postgresTransaction } from "@tackle/storage/postgres";
import pg from "pg";
import { type ChangeRow, changeOfRow, changeValues, pageOf } from "../change-log.ts";
import {
  type DocumentStore,
  type LoggedUpdate,
  type RowChange,
  type RowRoot,
  rowColumns,
  StoreConflictError,
} from "../document-store.ts";
import { postgresMigrations } from "../migrations.ts";
import { toMember } from "../sqlite-document-store.ts";

/** The channel an append notifies, with the document id as payload. */
const APPENDS_CHANNEL = "docscript_appends";

export interface PostgresDocumentStoreOptions {
  /** A connection string, or a pool the caller owns (then `close()` leaves it open). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Pool size when the store opens the pool (default 4). */
  readonly maxConnections?: number;
  /**
   * Documents one server can push to at the same moment: each push holds a connection of a separate
   * pool for its document's advisory lock (default 8; more wait for a lock connection).
   */
  readonly maxDocumentLocks?: number;
  /** How long a push waits for another server's push to the same document (default 30 000 ms). */
  readonly lockTimeoutMs?: number;
  /** Told when an idle pooled connection fails (the server restarted or ended it); default: a warning. */
  readonly onError?: (error: Error) => void;
}

export async function createPostgresDocumentStore(
  options: PostgresDocumentStoreOptions,
): Promise<DocumentStore> {
  // One pool policy: idle-connection losses go to onError (default: a process warning), never a crash.
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 4,
    label: "docscript",
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const pool = handle.pool;
  try {
    // Two servers starting at once take turns under the migration lock; a newer schema is refused.
    await migratePostgres(pool, { store: "docscript", migrations: postgresMigrations });
  } catch (error) {
    await handle.close();
    throw error;
  }
  // Document locks on their own connections, so a push waiting for another server never starves the
  // queries of the pool above; the session lock dies with its connection if this process does.
  const locks =
    options.connectionString === undefined
      ? { pool, close: async () => {} }
      : openPostgres({
          connectionString: options.connectionString,
          max: options.maxDocumentLocks ?? 8,
          connectionTimeoutMs: options.lockTimeoutMs ?? 30_000,
          label: "docscript locks",
          ...(options.onError === undefined ? {} : { onError: options.onError }),
        });
  const lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
  const stops = new Set<() => Promise<void>>();
  /** Upserts and deletes in two statements, however many rows (arrays as parameters). */
  const writeRows = async (
    client: pg.PoolClient,
    documentId: string,
    rows: readonly RowChange[],
    version: number,
  ): Promise<void> => {
    // The counts per kind move by what each row projected to before and what lands now.
    const deltas = new Map<string, number>();
    const count = (found: { type: string; kind: string }[], by: number) => {
      for (const member of found) {
        const key = JSON.stringify([member.type, member.kind]);
        deltas.set(key, (deltas.get(key) ?? 0) + by);
      }
    };
    for (const root of ["entities", "relations"] as const) {
      const ids = rows.filter((change) => change.root === root).map((change) => change.rowId);
      if (ids.length > 0) {
        const gone = await client.query<{ type: string; kind: string }>(
          "DELETE FROM docscript_members WHERE document_id = $1 AND root = $2 AND row_id = ANY($3::text[]) RETURNING type, kind",
          [documentId, root, ids],
        );
        count(gone.rows, -1);
      }
    }
    const members = rows.flatMap((change) =>
      (change.members ?? []).map((member) => ({ member, root: change.root, rowId: change.rowId })),
    );
    for (let start = 0; start < members.length; start += 5000) {
      const chunk = members.slice(start, start + 5000);
      const column = (pick: (entry: (typeof chunk)[number]) => string | undefined) =>
        chunk.map((entry) => pick(entry) ?? null);
      const landed = await client.query<{ type: string; kind: string }>(
        `INSERT INTO docscript_members
           (document_id, type, member_id, kind, root, row_id, endpoint0, endpoint1, variant_of, identity)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
           $8::text[], $9::text[], $10::text[])
         ON CONFLICT DO NOTHING RETURNING type, kind`,
        [
          documentId,
          column((entry) => entry.member.type),
          column((entry) => entry.member.id),
          column((entry) => entry.member.kind),
          column((entry) => entry.root),
          column((entry) => entry.rowId),
          column((entry) => entry.member.endpoint0),
          column((entry) => entry.member.endpoint1),
          column((entry) => entry.member.variantOf),
          column((entry) => entry.member.identity),
        ],
      );
      count(landed.rows, 1);
    }
    const moved = [...deltas]
      .filter(([, by]) => by !== 0)
      .map(([key, by]) => [...(JSON.parse(key) as [string, string]), by] as const);
    if (moved.length > 0) {
      await client.query(
        `INSERT INTO docscript_counts (document_id, type, kind, count)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[])
         ON CONFLICT (document_id, type, kind) DO UPDATE SET count = docscript_counts.count + excluded.count`,
        [documentId, moved.map((m) => m[0]), moved.map((m) => m[1]), moved.map((m) => m[2])],
      );
      await client.query("DELETE FROM docscript_counts WHERE document_id = $1 AND count <= 0", [documentId]);
    }
    const deleted = rows.filter((change) => change.json === undefined);
    const kept = rows
      .filter((change) => change.json !== undefined)
      .map((change) => ({ change, ...rowColumns(change) }));
    for (const root of ["entities", "relations"] as const) {
      const ids = deleted.filter((change) => change.root === root).map((change) => change.rowId);
      if (ids.length > 0)
        await client.query(
          "DELETE FROM docscript_rows WHERE document_id = $1 AND root = $2 AND row_id = ANY($3::text[])",
          [documentId, root, ids],
        );
    }
    // In chunks, so one statement's parameters stay small at a million rows.
    for (let start = 0; start < kept.length; start += 5000) {
      const chunk = kept.slice(start, start + 5000);
      await client.query(
        `INSERT INTO docscript_rows (document_id, root, row_id, kind, payload, endpoint0, endpoint1, version)
         SELECT $1, * , $8 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
         ON CONFLICT (document_id, root, row_id) DO UPDATE SET kind = excluded.kind, payload = excluded.payload,
           endpoint0 = excluded.endpoint0, endpoint1 = excluded.endpoint1, version = excluded.version`,
        [
          documentId,
          chunk.map((row) => row.change.root),
          chunk.map((row) => row.change.rowId),
          chunk.map((row) => row.kind),
          chunk.map((row) => row.payload),
          chunk.map((row) => row.endpoint0),
          chunk.map((row) => row.endpoint1),
          version,
        ],
      );
    }
  };
  /**
   * After a large document's rows landed at once: the planner's statistics, now, not when autovacuum
   * gets to them. Without them a page over a freshly stored 60k-entity document joined its members and
   * rows without their indexes (minutes), and each lookup of a push scanned (50–130 ms).
   */
  const analyzeAfterBulk = async (rowCount: number): Promise<void> => {
    if (rowCount >= 10_000) await pool.query("ANALYZE docscript_members, docscript_rows, docscript_counts");
  };
  const toUpdates = (rows: { seq: string; bytes: Buffer }[]): LoggedUpdate[] =>
    rows.map((row) => ({ seq: Number(row.seq), bytes: new Uint8Array(row.bytes) }));

  return {
    async createDocument({ documentId, tokenHash, snapshot, rows, issues }) {
      const created = await postgresTransaction(pool, async (client) => {
        const result = await client.query(
          "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING",
          [documentId, tokenHash, Buffer.from(snapshot)],
        );
        if (result.rowCount !== 1) return false;
        if (rows !== undefined)
          await client.query(
            "INSERT INTO docscript_projection (document_id, rows_seq, issues) VALUES ($1, 0, $2)",
            [documentId, JSON.stringify(issues ?? [])],
          );
        if (rows !== undefined) await writeRows(client, documentId, rows, 0);
        return true;
      });
      if (created) await analyzeAfterBulk(rows?.length ?? 0);
      return created;
    },
    async tokenHash(documentId) {
      const result = await pool.query<{ token_hash: string }>(
        "SELECT token_hash FROM docscript_documents WHERE document_id = $1",
        [documentId],
      );
      return result.rows[0]?.token_hash;
    },
    async load(documentId) {
      const connection = await pool.connect();
      try {
        // One snapshot-isolated read, so a concurrent compaction cannot drop updates between the two queries.
        await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        const document = await connection.query<{
          token_hash: string;
          snapshot: Buffer;
          snapshot_seq: string;
        }>("SELECT token_hash, snapshot, snapshot_seq FROM docscript_documents WHERE document_id = $1", [
          documentId,
        ]);
        const row = document.rows[0];
        if (row === undefined) {
          await connection.query("COMMIT");
          return undefined;
        }
        const updates = await connection.query<{ seq: string; bytes: Buffer }>(
          "SELECT seq, bytes FROM docscript_updates WHERE document_id = $1 AND seq > $2 ORDER BY seq",
          [documentId, row.snapshot_seq],
        );
        await connection.query("COMMIT");
        return {
          tokenHash: row.token_hash,
          snapshot: new Uint8Array(row.snapshot),
          snapshotSeq: Number(row.snapshot_seq),
          updates: toUpdates(updates.rows),
        };
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    async snapshotSeq(documentId) {
      const result = await pool.query<{ snapshot_seq: string }>(
        "SELECT snapshot_seq FROM docscript_documents WHERE document_id = $1",
        [documentId],
      );
      const row = result.rows[0];
      return row === undefined ? undefined : Number(row.snapshot_seq);
    },
    async updatesAfter(documentId, seq) {
      const result = await pool.query<{ seq: string; bytes: Buffer }>(
        "SELECT seq, bytes FROM docscript_updates WHERE document_id = $1 AND seq > $2 ORDER BY seq",
        [documentId, seq],
      );
      return toUpdates(result.rows);
    },
    async append({ documentId, seq, bytes, status, actor, rows, change, issues }) {
      const insert = `WITH appended AS (
             INSERT INTO docscript_updates (document_id, seq, bytes, status, actor) VALUES ($1, $2, $3, $4, $5)
             RETURNING document_id
           )
           SELECT pg_notify('${APPENDS_CHANNEL}', document_id) FROM appended`;
      const values = [documentId, seq, Buffer.from(bytes), status, actor ?? null];
      try {
        // The notification goes out when the row commits: every listening server learns of it at once.
        if (rows === undefined && change === undefined) await pool.query(insert, values);
        else
          await postgresTransaction(pool, async (client) => {
            await client.query(insert, values);
            // The change log entry lands with its update, or neither does.
            if (change !== undefined)
              await client.query(
                `INSERT INTO docscript_changes (document_id, seq, status, actor, credential, peers, plan_ids,
                   entities_created, entities_changed, entities_deleted, relations_created, relations_changed,
                   relations_deleted) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
                [documentId, seq, status, ...changeValues(actor, change)],
              );
            if (rows === undefined) return;
            // Rows only onto a projection that holds through the previous update; else it stays behind.
            const advanced = await client.query(
              "UPDATE docscript_projection SET rows_seq = $1, issues = $4 WHERE document_id = $2 AND rows_seq = $3",
              [seq, documentId, seq - 1, issues === undefined ? null : JSON.stringify(issues)],
            );
            if (advanced.rowCount === 1) await writeRows(client, documentId, rows, seq);
          });
      } catch (error) {
        if ((error as { code?: string }).code === "23505")
          throw new StoreConflictError(documentId, seq, error);
        throw error;
      }
    },
    async changes(documentId, { before, limit }) {
      const result = await pool.query<ChangeRow>(
        "SELECT * FROM docscript_changes WHERE document_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
        [documentId, before ?? Number.MAX_SAFE_INTEGER, limit + 1],
      );
      return pageOf(result.rows.map(changeOfRow), limit);
    },
    async rowsSeq(documentId) {
      const result = await pool.query<{ rows_seq: string | null }>(
        "SELECT rows_seq FROM docscript_projection WHERE document_id = $1",
        [documentId],
      );
      const value = result.rows[0]?.rows_seq;
      return value === null || value === undefined ? undefined : Number(value);
    },
    async replaceRows(documentId, throughSeq, rows, issues) {
      const replaced = await postgresTransaction(pool, async (client) => {
        // The document's row locked: an append committing meanwhile waits, or is seen below.
        const last = await client.query<{ seq: string }>(
          `SELECT greatest(coalesce((SELECT max(seq) FROM docscript_updates WHERE document_id = $1), 0), snapshot_seq) AS seq
           FROM docscript_documents WHERE document_id = $1 FOR UPDATE`,
          [documentId],
        );
        const row = last.rows[0];
        if (row === undefined || Number(row.seq) > throughSeq) return false;
        await client.query("DELETE FROM docscript_rows WHERE document_id = $1", [documentId]);
        await client.query("DELETE FROM docscript_members WHERE document_id = $1", [documentId]);
        await client.query("DELETE FROM docscript_counts WHERE document_id = $1", [documentId]);
        await writeRows(client, documentId, rows, throughSeq);
        await client.query(
          `INSERT INTO docscript_projection (document_id, rows_seq, issues) VALUES ($2, $1, $3)
           ON CONFLICT (document_id) DO UPDATE SET rows_seq = excluded.rows_seq, issues = excluded.issues`,
          [throughSeq, documentId, JSON.stringify(issues)],
        );
        return true;
      });
      if (replaced) await analyzeAfterBulk(rows.length);
      return replaced;
    },
    async advanceRows(documentId, seq, rows, issues) {
      return postgresTransaction(pool, async (client) => {
        const advanced = await client.query(
          "UPDATE docscript_projection SET rows_seq = $1, issues = $4 WHERE document_id = $2 AND rows_seq = $3",
          [seq, documentId, seq - 1, JSON.stringify(issues)],
        );
        if (advanced.rowCount !== 1) return false;
        await writeRows(client, documentId, rows, seq);
        return true;
      });
    },
    async documentIssues(documentId) {
      const result = await pool.query<{ issues: string | null }>(
        "SELECT issues FROM docscript_projection WHERE document_id = $1",
        [documentId],
      );
      const issues = result.rows[0]?.issues;
      return issues === null || issues === undefined ? undefined : JSON.parse(issues);
    },
    async readMembers(documentId, query) {
      const result = await pool.query(
        `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of, m.identity,
                r.payload
         FROM docscript_members m
         JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
         WHERE m.document_id = $1 AND m.type = $2 AND m.member_id > $3
           AND ($4::text[] IS NULL OR m.kind = ANY($4::text[]))
           AND ($5::text[] IS NULL OR m.member_id = ANY($5::text[]))
           AND ($6::text IS NULL OR m.endpoint0 = $6 OR m.endpoint1 = $6)
           AND ($7::text IS NULL OR m.variant_of = $7)
           AND ($8::text IS NULL OR m.identity = $8)
           AND ($10::text[] IS NULL OR m.endpoint0 = ANY($10::text[]) OR m.endpoint1 = ANY($10::text[]))
         ORDER BY m.member_id, m.row_id LIMIT $9`,
        [
          documentId,
          query.type,
          query.after ?? "",
          query.kinds ?? null,
          query.ids ?? null,
          query.endpoint ?? null,
          query.variantOf ?? null,
          query.identity ?? null,
          query.limit,
          query.endpoints ?? null,
        ],
      );
      return result.rows.map(toMember);
    },
    async countMembers(documentId) {
      const result = await pool.query<{ type: "entity" | "relation"; kind: string; n: string }>(
        "SELECT type, kind, count AS n FROM docscript_counts WHERE document_id = $1 AND count > 0",
        [documentId],
      );
      return result.rows.map((row) => ({ type: row.type, kind: row.kind, count: Number(row.n) }));
    },
    async readRows(documentId, query) {
      const result = await pool.query<{
        root: RowRoot;
        row_id: string;
        kind: string;
        payload: string;
        version: string;
      }>(
        `SELECT root, row_id, kind, payload, version FROM docscript_rows
         WHERE document_id = $1 AND root = $2 AND row_id > $3
           AND ($4::text[] IS NULL OR kind = ANY($4::text[]))
           AND ($5::text[] IS NULL OR row_id = ANY($5::text[]))
           AND ($6::text IS NULL OR endpoint0 = $6 OR endpoint1 = $6)
         ORDER BY row_id LIMIT $7`,
        [
          documentId,
          query.root,
          query.after ?? "",
          query.kinds ?? null,
          query.ids ?? null,
          query.endpoint ?? null,
          query.limit,
        ],
      );
      return result.rows.map((row) => ({
        root: row.root,
        rowId: row.row_id,
        kind: row.kind,
        json: JSON.parse(row.payload),
        version: Number(row.version),
      }));
    },
    async countRows(documentId) {
      const result = await pool.query<{ root: RowRoot; kind: string; n: string }>(
        "SELECT root, kind, count(*) AS n FROM docscript_rows WHERE document_id = $1 GROUP BY root, kind",
        [documentId],
      );
      return result.rows.map((row) => ({ root: row.root, kind: row.kind, count: Number(row.n) }));
    },
    async compact(documentId, snapshot, throughSeq) {
      const connection = await pool.connect();
      try {
        await connection.query("BEGIN");
        await connection.query(
          "UPDATE docscript_documents SET snapshot = $1, snapshot_seq = $2 WHERE document_id = $3 AND snapshot_seq < $2",
          [Buffer.from(snapshot), throughSeq, documentId],
        );
        await connection.query("DELETE FROM docscript_updates WHERE document_id = $1 AND seq <= $2", [
          documentId,
          throughSeq,
        ]);
        await connection.query("COMMIT");
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    async lockDocument(documentId) {
      const client = await locks.pool.connect();
      try {
        await client.query("SELECT set_config('lock_timeout', $1, false)", [`${lockTimeoutMs}ms`]);
        await client.query("SELECT pg_advisory_lock(hashtext('docscript:' || $1))", [documentId]);
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        try {
          await client.query("SELECT pg_advisory_unlock(hashtext('docscript:' || $1))", [documentId]);
          client.release();
        } catch (error) {
          // A connection that cannot unlock is closed, which releases the lock.
          client.release(error as Error);
        }
      };
    },
    async watchAppends(listener) {
      let stopped = false;
      let current: pg.Client | undefined;
      let endCurrent: (error?: Error) => void = () => {};
      let retry: NodeJS.Timeout | undefined;
      const onNotification = (message: pg.Notification) => {
        if (message.channel === APPENDS_CHANNEL && message.payload !== undefined) listener(message.payload);
      };
      // A dedicated connection (a pooled one from a caller's pool otherwise); when it is lost, listen
      // again after a short wait — reads catch up from the database anyway, so a missed notice only
      // delays a waiting reader to its deadline.
      const listen = async (): Promise<void> => {
        const pooled = options.connectionString === undefined;
        const next = pooled
          ? await pool.connect()
          : new pg.Client({ connectionString: options.connectionString });
        const end = (error?: Error) =>
          pooled ? (next as pg.PoolClient).release(error) : void next.end().catch(() => undefined);
        if (!pooled) await next.connect();
        next.on("notification", onNotification);
        next.on("error", (error: Error) => {
          options.onError?.(error);
          if (current !== next) return;
          current = undefined;
          end(error);
          scheduleRetry(250);
        });
        try {
          await next.query(`LISTEN ${APPENDS_CHANNEL}`);
        } catch (error) {
          end(error as Error);
          throw error;
        }
        if (stopped) end();
        else {
          current = next;
          endCurrent = end;
        }
      };
      const scheduleRetry = (afterMs: number) => {
        if (!stopped) retry = setTimeout(() => void listen().catch(() => scheduleRetry(1000)), afterMs);
      };
      await listen();
      const stop = async () => {
        stopped = true;
        clearTimeout(retry);
        const listening = current;
        current = undefined;
        if (listening === undefined) return;
        listening.off("notification", onNotification);
        endCurrent();
      };
      stops.add(stop);
      return async () => {
        stops.delete(stop);
        await stop();
      };
    },
    async close() {
      for (const stop of [...stops]) await stop();
      stops.clear();
      await handle.close();
      await locks.close();
    },
  };
}
