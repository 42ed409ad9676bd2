/** BM25 computed in SQL over a scope's statistics, and the novelty check's candidates for a batch. */
import { createHash } from "node:crypto";
import { BM25_B, BM25_K1 } from "../bm25.ts";
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { memoryFromRow, scopeCondition } from "../row-codec.ts";
import {
  mark,
  memorySelect,
  oneOf,
  type PostgresContext,
  plainWords,
  type Row,
  tsQuery,
} from "./postgres-sql.ts";

export function postgresMemorySearch(
  context: PostgresContext,
): Pick<MemoryStore, "searchMemories" | "candidateMemories"> {
  const { db, all } = context;
  return {
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
        if (searchOptions.kinds) sql += ` AND ${oneOf(`${alias}.kind`, searchOptions.kinds, parameters)}`;
        return sql;
      };
      // A query term is a lexeme (matched exactly) or a prefix (matching every lexeme it starts), each
      // stemmed as to_tsquery stems it; tf and df are counted per query term, as FTS5 counts a prefix.
      const sql = `WITH query AS (SELECT to_tsquery('english', $1) AS q),
        terms AS (
          SELECT term, false AS prefix FROM unnest(tsvector_to_array(to_tsvector('english', $3))) term
          UNION SELECT term, true FROM unnest(tsvector_to_array(to_tsvector('english', $4))) term),
        scope_size AS (
          SELECT count(*)::float8 AS n FROM (SELECT 1 FROM memory_memories s WHERE ${filters("s")} LIMIT 10000) capped),
        matched AS (
          SELECT m.seq, m.tsv, greatest(length(m.tsv), 1)::float8 AS dl FROM memory_memories m, query
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
            * hits.tf * ${BM25_K1 + 1} / (hits.tf + ${BM25_K1} * (${1 - BM25_B} + ${BM25_B} * hits.dl / average.avgdl))) AS score
          FROM hits JOIN frequency USING (term), scope_size, average GROUP BY hits.seq)
        SELECT ${memorySelect}, scored.score FROM scored JOIN memory_memories m ON m.seq = scored.seq`;
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
      if (candidateOptions.kinds) filters += ` AND ${oneOf("m.kind", candidateOptions.kinds, parameters)}`;
      const rows = await all(
        `SELECT q.query_index, ${memorySelect}
         FROM unnest($2::text[], $3::int[]) AS q(query, query_index)
         CROSS JOIN LATERAL (
           SELECT m.*, ts_rank(m.tsv, tq) AS rank FROM memory_memories m, to_tsquery('english', q.query) tq
           WHERE ${filters} AND m.tsv @@ tq ORDER BY rank DESC, m.seq DESC LIMIT $4) m
         ORDER BY q.query_index, m.rank DESC, m.seq DESC`,
        parameters,
      );
      for (const row of rows) found[Number(row.query_index)]!.push(memoryFromRow(row));
      return found;
    },
  };
}
