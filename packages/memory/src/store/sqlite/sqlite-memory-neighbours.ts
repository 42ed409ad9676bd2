/** A conversation turn's neighbouring turns: the nearest active memories of its exact scope, in write order. */
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { memoryFromRow } from "../row-codec.ts";
import { oneOf, type SqliteContext } from "./sqlite-sql.ts";

export function sqliteMemoryNeighbours(context: SqliteContext): Pick<MemoryStore, "neighbourMemories"> {
  const { all } = context;
  return {
    async neighbourMemories(tenantId, ids, window) {
      if (ids.length === 0 || window <= 0) return new Map();
      // One statement: per anchor, the positions of the nearest active rows of its scope before and
      // after it, each an ordered range of the (tenant_id, scope_key, seq) index of active rows
      // (migration 2): a few rows read, however many other scopes' rows were written in between.
      const parameters: unknown[] = [window, window, tenantId];
      const anchors = all(
        `SELECT a.id,
           (SELECT group_concat(seq) FROM (SELECT b.seq FROM memory_memories b WHERE b.tenant_id = a.tenant_id
              AND b.scope_key = a.scope_key AND b.status = 'active' AND b.seq < a.seq ORDER BY b.seq DESC LIMIT ?)) AS before,
           (SELECT group_concat(seq) FROM (SELECT c.seq FROM memory_memories c WHERE c.tenant_id = a.tenant_id
              AND c.scope_key = a.scope_key AND c.status = 'active' AND c.seq > a.seq ORDER BY c.seq LIMIT ?)) AS after
         FROM memory_memories a WHERE +a.tenant_id = ? AND ${oneOf("a.id", ids, parameters)}`,
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
        seqs.length === 0
          ? []
          : all(`SELECT * FROM memory_memories WHERE ${oneOf("seq", seqs, wanted)}`, wanted);
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
  };
}
