/** A conversation turn's neighbouring turns: the nearest active memories of its exact scope, in one statement. */
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { memoryFromRow } from "../row-codec.ts";
import { memorySelect, type PostgresContext } from "./postgres-sql.ts";

export function postgresMemoryNeighbours(context: PostgresContext): Pick<MemoryStore, "neighbourMemories"> {
  const { all } = context;
  return {
    async neighbourMemories(tenantId, ids, window) {
      if (ids.length === 0 || window <= 0) return new Map();
      // One statement for every anchor: the nearest active rows of its scope before and after it,
      // each an ordered range of the (tenant_id, scope_key, seq) index of active rows (migration 3).
      const rows = await all(
        `SELECT a.id AS anchor_id, n.offset_from_anchor, ${memorySelect}
         FROM memory_memories a
         CROSS JOIN LATERAL (
           (SELECT b.seq, -row_number() OVER (ORDER BY b.seq DESC) AS offset_from_anchor FROM memory_memories b
             WHERE b.tenant_id = a.tenant_id AND b.scope_key = a.scope_key AND b.status = 'active' AND b.seq < a.seq
             ORDER BY b.seq DESC LIMIT $3)
           UNION ALL
           (SELECT c.seq, row_number() OVER (ORDER BY c.seq) FROM memory_memories c
             WHERE c.tenant_id = a.tenant_id AND c.scope_key = a.scope_key AND c.status = 'active' AND c.seq > a.seq
             ORDER BY c.seq LIMIT $3)) n
         JOIN memory_memories m ON m.seq = n.seq
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
  };
}
