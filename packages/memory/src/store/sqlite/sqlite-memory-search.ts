/** BM25 over a scope's own statistics (FTS5 pre-selects), and the novelty check's candidates. */
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { memoryFromRow, scopeCondition } from "../row-codec.ts";
import { scoreWithScopeStatistics } from "./scope-bm25.ts";
import { scopedMatch } from "./scope-tokens.ts";
import { bind, mark, oneOf, type SqliteContext } from "./sqlite-sql.ts";

/** How many of a scope's best index matches are rescored with the scope's statistics. */
const candidateCap = 1000;
/** The scope's size is counted up to this many memories (as on PostgreSQL; past it the IDF barely moves). */
const scopeSizeCap = 10_000;

export function sqliteMemorySearch(
  context: SqliteContext,
): Pick<MemoryStore, "searchMemories" | "candidateMemories"> {
  const { all, get } = context;
  const methods: Pick<MemoryStore, "searchMemories" | "candidateMemories"> = {
    async searchMemories(tenantId, scope, terms, searchOptions) {
      // The index narrows by the scope's tokens; the SQL conditions below still decide (a token is a hash).
      const match = scopedMatch(tenantId, scope, terms, searchOptions.every === true);
      if (match.length === 0) return [];
      // The match text is parameter 1 of every statement below, the filters' own parameters follow
      // (numbered): the scope's size is counted by the filters alone, with parameter 1 bound unused.
      const parameters: unknown[] = [match, tenantId];
      let filters = `m.tenant_id = ${mark(2)} AND m.status = 'active'${scopeCondition(scope, parameters, mark, "m.")}`;
      if (searchOptions.kinds) filters += ` AND ${oneOf("m.kind", searchOptions.kinds, parameters)}`;
      if (searchOptions.order === "candidates") {
        const limited = [...parameters];
        return all(
          `SELECT m.*, -bm25(memory_memories_search, 1.0, 0.0) AS score FROM memory_memories_search JOIN memory_memories m ON m.seq = memory_memories_search.rowid
           WHERE memory_memories_search MATCH ${mark(1)} AND ${filters} ORDER BY bm25(memory_memories_search, 1.0, 0.0) LIMIT ${bind(limited, searchOptions.limit)}`,
          limited,
        ).map((row) => ({ memory: memoryFromRow(row), score: Number(row.score) }));
      }
      // The index pre-selects (its own table-wide order matters only past `candidateCap` matches in
      // the scope); BM25 is then computed over the scope's statistics alone (scope-bm25.ts). Only the
      // candidates' text is read for that; whole rows only for the `limit` best.
      // The index's own ranking is computed only when the scope holds more matches than are rescored.
      const select = `SELECT m.seq, m.content FROM memory_memories_search JOIN memory_memories m ON m.seq = memory_memories_search.rowid
         WHERE memory_memories_search MATCH ${mark(1)} AND ${filters}`;
      let matches = all(`${select} LIMIT ${candidateCap + 1}`, parameters);
      if (matches.length > candidateCap) {
        matches = all(
          `${select} ORDER BY bm25(memory_memories_search, 1.0, 0.0) LIMIT ${candidateCap}`,
          parameters,
        );
      }
      const rows = (matches as { seq: number; content: string }[]).sort(
        (left, right) => Number(right.seq) - Number(left.seq),
      );
      const size = get(
        `SELECT COUNT(*) AS n FROM (SELECT 1 FROM memory_memories m WHERE ${filters} LIMIT ${scopeSizeCap})`,
        parameters,
      );
      let documentFrequency: Map<string, number> | undefined;
      if (rows.length >= candidateCap) {
        documentFrequency = new Map();
        for (const term of new Set(terms)) {
          const termMatch = scopedMatch(tenantId, scope, [term]);
          if (termMatch.length === 0) continue;
          const counted = get(
            `SELECT COUNT(*) AS n FROM memory_memories_search JOIN memory_memories m ON m.seq = memory_memories_search.rowid
             WHERE memory_memories_search MATCH ${mark(1)} AND ${filters}`,
            [termMatch, ...parameters.slice(1)],
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
          `SELECT * FROM memory_memories WHERE ${oneOf(
            "seq",
            best.map(({ item }) => item.seq),
            seqs,
          )}`,
          seqs,
        ).map((row) => [Number(row.seq), memoryFromRow(row)]),
      );
      return best.map(({ item, score }) => ({ memory: full.get(Number(item.seq))!, score }));
    },

    async candidateMemories(tenantId, scope, queries, candidateOptions) {
      // In process, so one query at a time costs no round trip.
      const found: StoredMemory[][] = [];
      for (const query of queries) {
        const hits = await methods.searchMemories(tenantId, scope, query.terms, {
          limit: candidateOptions.limit,
          every: query.every,
          order: "candidates",
          ...(candidateOptions.kinds ? { kinds: candidateOptions.kinds } : {}),
        });
        found.push(hits.map((hit) => hit.memory));
      }
      return found;
    },
  };
  return methods;
}
