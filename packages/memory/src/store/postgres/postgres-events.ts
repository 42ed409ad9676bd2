/** The conversation log: events appended (one or a batch, a few statements), listed, read and counted. */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { MemoryStore, StoredEvent } from "../memory-store.ts";
import { eventFromRow, scopeCondition, scopeParameters } from "../row-codec.ts";
import { byTenant, chargedMetadata, eventsAdded, type UsageLimits } from "../tenant-usage.ts";
import {
  chargeUsage,
  insertChunk,
  lockUsage,
  mark,
  marks,
  type PostgresContext,
  type Row,
} from "./postgres-sql.ts";

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
  "metadata_bytes",
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
    chargedMetadata(event),
  ];
}

/**
 * Locks, until the transaction ends, each session the events are written to, before their sequence
 * numbers are drawn (ADR 0535): a session's writes then commit in the order of their numbers, so a
 * reader paging a session oldest first never moves its cursor past a number still uncommitted.
 * Locks in key order (no two batches wait on each other); an event without a session locks nothing,
 * since no reader pages those oldest first. Keys are two-int advisory keys, apart from one-key users.
 */
async function lockSessions(client: pg.PoolClient, events: readonly Omit<StoredEvent, "seq">[]) {
  const keys = new Map<string, [number, number]>();
  for (const event of events) {
    if (event.sessionId === undefined) continue;
    const digest = createHash("sha256")
      .update(`memory_events\u0000${event.tenantId}\u0000${event.sessionId}`)
      .digest();
    const key: [number, number] = [digest.readInt32BE(0), digest.readInt32BE(4)];
    keys.set(key.join(":"), key);
  }
  if (keys.size === 0) return;
  const sorted = [...keys.values()].sort((left, right) => left[0] - right[0] || left[1] - right[1]);
  await client.query(
    "SELECT pg_advisory_xact_lock(k.high, k.low) FROM unnest($1::int[], $2::int[]) AS k(high, low)",
    [sorted.map((key) => key[0]), sorted.map((key) => key[1])],
  );
}

/**
 * Appends events in order, a few statements for the lot (multi-row inserts, then one read of those
 * whose custom id was taken): each answered as stored, or as the event already holding its custom id.
 */
async function insertEvents(
  db: pg.PoolClient,
  events: readonly Omit<StoredEvent, "seq">[],
  limits: UsageLimits | undefined,
): Promise<{ event: StoredEvent; created: boolean }[]> {
  await lockSessions(db, events);
  for (const tenantId of byTenant(events).keys()) await lockUsage(db, tenantId);
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
  // After the session locks (ADR 0535), as every write takes them: sessions, then the counter row.
  for (const [tenantId, group] of byTenant([...inserted.values()])) {
    await chargeUsage(db, tenantId, eventsAdded(group), limits);
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
  const { all, one, transaction } = context;
  return {
    async appendEvent(event, limits) {
      const [answer] = await transaction((client) => insertEvents(client, [event], limits));
      return answer!;
    },

    async appendEvents(events, limits) {
      if (events.length === 0) return [];
      return transaction((client) => insertEvents(client, events, limits));
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
