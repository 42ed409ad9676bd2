/** The conversation log: events appended (one or a batch), listed, read and counted. */
import type { MemoryStore, StoredEvent } from "../memory-store.ts";
import { eventFromRow, scopeCondition, scopeParameters } from "../row-codec.ts";
import { byTenant, chargedMetadata, eventsAdded } from "../tenant-usage.ts";
import { bind, chargeUsage, mark, oneOf, type SqliteContext } from "./sqlite-sql.ts";

/** Appends an event, or answers the one already stored under its custom id; inside a transaction. */
function appendOne(
  { run, get }: SqliteContext,
  event: Omit<StoredEvent, "seq">,
): { event: StoredEvent; created: boolean } {
  const result = run(
    `INSERT INTO memory_events (id, tenant_id, custom_id, role, content, user_id, agent_id, session_id, metadata, source, import_job_id, occurred_at, created_at, metadata_bytes)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
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
      chargedMetadata(event),
    ],
  );
  const row =
    result.changes === 1
      ? get("SELECT * FROM memory_events WHERE tenant_id = ? AND id = ?", [event.tenantId, event.id])
      : get("SELECT * FROM memory_events WHERE tenant_id = ? AND custom_id = ?", [
          event.tenantId,
          event.customId ?? null,
        ]);
  if (!row) throw new Error(`event ${event.id} was neither inserted nor found by its custom id`);
  return { event: eventFromRow(row), created: result.changes === 1 };
}

export function sqliteEvents(
  context: SqliteContext,
): Pick<MemoryStore, "appendEvent" | "appendEvents" | "listEvents" | "getEvents" | "countEvents"> {
  const { all, get, transaction } = context;
  return {
    async appendEvent(event, limits) {
      return transaction(() => {
        const result = appendOne(context, event);
        if (result.created) chargeUsage(context, event.tenantId, eventsAdded([event]), limits);
        return result;
      });
    },

    async appendEvents(events, limits) {
      return transaction(() => {
        const results = events.map((event) => appendOne(context, event));
        const created = results.filter((result) => result.created).map((result) => result.event);
        for (const [tenantId, group] of byTenant(created)) {
          chargeUsage(context, tenantId, eventsAdded(group), limits);
        }
        return results;
      });
    },

    async listEvents(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_events WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.cursor !== undefined) {
        sql += ` AND seq ${listOptions.order === "asc" ? ">" : "<"} ${bind(parameters, listOptions.cursor)}`;
      }
      return all(
        `${sql} ORDER BY seq ${listOptions.order === "asc" ? "ASC" : "DESC"} LIMIT ${bind(parameters, listOptions.limit)}`,
        parameters,
      ).map(eventFromRow);
    },

    async getEvents(tenantId, ids) {
      if (ids.length === 0) return [];
      const parameters: unknown[] = [tenantId];
      return all(
        `SELECT * FROM memory_events WHERE tenant_id = ? AND ${oneOf("id", ids, parameters)} ORDER BY seq`,
        parameters,
      ).map(eventFromRow);
    },

    async countEvents(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      return Number(
        get(
          `SELECT COUNT(*) AS n FROM memory_events WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`,
          parameters,
        )?.n ?? 0,
      );
    },
  };
}
