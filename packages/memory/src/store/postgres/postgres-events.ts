/** The conversation log: events appended (one or a batch, a few statements), listed, read and counted. */
import type pg from "pg";
import type { MemoryStore, StoredEvent } from "../memory-store.ts";
import { eventFromRow, scopeCondition, scopeParameters } from "../row-codec.ts";
import { insertChunk, mark, marks, type PostgresContext, type Row } from "./postgres-sql.ts";

const eventColumns = [
  "id",
  "tenant_id",
  "custom_id",
  "role",
  "content",
  "user_id",
  "agent_id",
  "session_id",
  "metadata",
  "source",
  "import_job_id",
  "occurred_at",
  "created_at",
] as const;

function eventValues(event: Omit<StoredEvent, "seq">): unknown[] {
  return [
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
  ];
}

/**
 * Appends events in order, a few statements for the lot (multi-row inserts, then one read of those
 * whose custom id was taken): each answered as stored, or as the event already holding its custom id.
 */
async function insertEvents(
  db: pg.Pool | pg.PoolClient,
  events: readonly Omit<StoredEvent, "seq">[],
): Promise<{ event: StoredEvent; created: boolean }[]> {
  const inserted = new Map<string, StoredEvent>();
  for (let from = 0; from < events.length; from += insertChunk) {
    const chunk = events.slice(from, from + insertChunk);
    const rows = chunk.map((_, index) => `(${marks(index * eventColumns.length + 1, eventColumns.length)})`);
    const result = await db.query(
      `INSERT INTO memory_events (${eventColumns.join(", ")}) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING RETURNING *`,
      chunk.flatMap(eventValues),
    );
    for (const row of result.rows as Row[]) inserted.set(String(row.id), eventFromRow(row));
  }
  const taken = events.filter((event) => !inserted.has(event.id));
  const holders = new Map<string, StoredEvent>();
  if (taken.length > 0) {
    const rows = (
      await db.query(
        `SELECT e.* FROM memory_events e JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, custom_id)
         ON e.tenant_id = k.tenant_id AND e.custom_id = k.custom_id`,
        [taken.map((event) => event.tenantId), taken.map((event) => event.customId ?? null)],
      )
    ).rows as Row[];
    for (const row of rows)
      holders.set(`${String(row.tenant_id)}\u0000${String(row.custom_id)}`, eventFromRow(row));
  }
  return events.map((event) => {
    const created = inserted.get(event.id);
    if (created) return { event: created, created: true };
    const holder = holders.get(`${event.tenantId}\u0000${event.customId ?? ""}`);
    if (!holder) throw new Error(`event ${event.id} was neither inserted nor found by its custom id`);
    return { event: holder, created: false };
  });
}

export function postgresEvents(
  context: PostgresContext,
): Pick<MemoryStore, "appendEvent" | "appendEvents" | "listEvents" | "getEvents" | "countEvents"> {
  const { db, all, one, transaction } = context;
  return {
    async appendEvent(event) {
      const [answer] = await insertEvents(db(), [event]);
      return answer!;
    },

    async appendEvents(events) {
      if (events.length === 0) return [];
      return transaction((client) => insertEvents(client, events));
    },

    async listEvents(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_events WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.cursor !== undefined) {
        parameters.push(listOptions.cursor);
        sql +=
          listOptions.order === "asc"
            ? ` AND seq > $${parameters.length}`
            : ` AND seq < $${parameters.length}`;
      }
      parameters.push(listOptions.limit);
      return (
        await all(
          `${sql} ORDER BY seq ${listOptions.order === "asc" ? "ASC" : "DESC"} LIMIT $${parameters.length}`,
          parameters,
        )
      ).map(eventFromRow);
    },

    async getEvents(tenantId, ids) {
      if (ids.length === 0) return [];
      return (
        await all("SELECT * FROM memory_events WHERE tenant_id = $1 AND id = ANY($2) ORDER BY seq", [
          tenantId,
          [...ids],
        ])
      ).map(eventFromRow);
    },

    async countEvents(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COUNT(*) AS n FROM memory_events WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },
  };
}
