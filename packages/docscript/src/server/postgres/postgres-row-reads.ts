/**
 * The PostgreSQL store's reads of a document's rows and members: pages by id, kind, endpoint, variant
 * base, identity or a window on a number field (migration 7), and the counts per kind.
 */
import { postgresDialect as sql } from "@tackle/storage";
import type pg from "pg";
import type {
  DocumentStore,
  FoundMember,
  MemberQuery,
  NumberRange,
  OrderedQuery,
  RowRoot,
} from "../document-store.ts";
import { type MemberRecord, toMember } from "../member-record.ts";
import { postgresPosition } from "../migrations.ts";

const memberFields = `m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
  m.identity`;
const memberColumns = `${memberFields}, r.payload`;
/** The members alone, their rows not read (`MemberQuery.bare`). */
const bareColumns = `${memberFields}, NULL::text AS payload`;
const withRows =
  "JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id";
/** Each member's row probed in the row index (`OFFSET 0`: the planner may not hash the whole table). */
const rowProbe = `CROSS JOIN LATERAL (SELECT r.payload FROM docscript_rows r WHERE r.document_id = $1
       AND r.root = m.root AND r.row_id = m.row_id OFFSET 0) r`;

export type PostgresRowReads = Pick<
  DocumentStore,
  "readMembers" | "numbersIndexed" | "countMembers" | "readRows" | "countRows"
>;

export function postgresRowReads(pool: pg.Pool): PostgresRowReads {
  const numbersIndexed = async (documentId: string): Promise<boolean> => {
    const result = await pool.query<{ numbers_indexed: boolean }>(
      "SELECT numbers_indexed FROM docscript_projection WHERE document_id = $1",
      [documentId],
    );
    return result.rows[0]?.numbers_indexed === true;
  };
  return {
    numbersIndexed,
    async readMembers(documentId, query) {
      if (query.ordered !== undefined) return ordered(pool, documentId, query.ordered, query.limit);
      // A window on a document stored before the index: every entity of the kinds is a candidate.
      if (query.range !== undefined && (await numbersIndexed(documentId)))
        return inWindow(pool, documentId, query, query.range);
      if (byIdsAlone(query)) return byIds(pool, documentId, query, query.ids);
      const filters = `m.type = $2 AND m.member_id > $3
           AND ($4::text[] IS NULL OR ${sql.anyOf("m.kind", 4)})
           AND ($5::text[] IS NULL OR ${sql.anyOf("m.member_id", 5)})
           AND ($7::text IS NULL OR m.variant_of = $7)
           AND ($8::text IS NULL OR m.identity = $8)
           AND ($10::text[] IS NULL OR ${sql.anyOf("m.endpoint0", 10)} OR ${sql.anyOf("m.endpoint1", 10)})
           AND ($11::text[] IS NULL OR ${sql.anyOf("m.variant_of", 11)})
           AND ($12::text[] IS NULL OR ${sql.anyOf("m.identity", 12)})`;
      const source =
        query.bare === true
          ? `${bareColumns} FROM docscript_members m`
          : `${memberColumns} FROM docscript_members m ${withRows}`;
      const page = (where: string) => `SELECT ${source}
         WHERE m.document_id = $1 AND ${where} AND ${filters} ORDER BY m.member_id, m.row_id LIMIT $9`;
      // One entity's relations: a page from each end's index, which holds them in id order, merged (a
      // track's page of 30,000 clips walked the whole id index for those naming it: ~20-180 ms a page).
      const text =
        query.endpoint === undefined
          ? page("$6::text IS NULL")
          : `SELECT * FROM ((${page("m.endpoint0 = $6")}) UNION ALL
               (${page("m.endpoint1 = $6 AND (m.endpoint0 IS NULL OR m.endpoint0 <> $6)")})) u
             ORDER BY member_id, row_id LIMIT $9`;
      const result = await pool.query<MemberRecord>(text, [
        documentId,
        query.type,
        query.after ?? "",
        listOrNull(query.kinds),
        listOrNull(query.ids),
        query.endpoint ?? null,
        query.variantOf ?? null,
        query.identity ?? null,
        query.limit,
        listOrNull(query.endpoints),
        listOrNull(query.variantsOf),
        listOrNull(query.identities),
      ]);
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
           AND ($4::text[] IS NULL OR ${sql.anyOf("kind", 4)})
           AND ($5::text[] IS NULL OR ${sql.anyOf("row_id", 5)})
           AND ($6::text IS NULL OR endpoint0 = $6 OR endpoint1 = $6)
         ORDER BY row_id LIMIT $7`,
        [
          documentId,
          query.root,
          query.after ?? "",
          listOrNull(query.kinds),
          listOrNull(query.ids),
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
  };
}

/** A query naming ids, filtered by nothing but its type, kinds and cursor. */
function byIdsAlone(query: MemberQuery): query is MemberQuery & { ids: readonly string[] } {
  return (
    query.ids !== undefined &&
    query.endpoint === undefined &&
    query.endpoints === undefined &&
    query.variantOf === undefined &&
    query.variantsOf === undefined &&
    query.identity === undefined &&
    query.identities === undefined &&
    query.range === undefined
  );
}

/**
 * The members of the ids given, each id looked up in the member index and each row in the row index
 * (a page's claims: 5,000 markers). Left to itself, the planner hashes every member and row of the
 * document for them (~100-150 ms at 100k entities); `OFFSET 0` keeps each lookup a probe. Bare, the
 * rows are not read (a window page's claims: its 5,000 rows were read and parsed again, ~50 ms a page).
 */
async function byIds(
  pool: pg.Pool,
  documentId: string,
  query: MemberQuery,
  ids: readonly string[],
): Promise<FoundMember[]> {
  const result = await pool.query<MemberRecord>(
    `SELECT ${query.bare === true ? bareColumns : memberColumns}
     FROM (SELECT DISTINCT unnest($3::text[]) AS id) i
     CROSS JOIN LATERAL (SELECT * FROM docscript_members m WHERE m.document_id = $1 AND m.type = $2
       AND m.member_id = i.id AND m.member_id > $4 AND ($5::text[] IS NULL OR ${sql.anyOf("m.kind", 5)})
       OFFSET 0) m
     ${query.bare === true ? "" : rowProbe}
     ORDER BY m.member_id, m.row_id LIMIT $6`,
    [documentId, query.type, sql.list(ids), query.after ?? "", listOrNull(query.kinds), query.limit],
  );
  return result.rows.map(toMember);
}

function listOrNull(values: readonly string[] | undefined): unknown {
  return values === undefined ? null : sql.list(values);
}

/**
 * Entities of the kinds whose field lies in the window, from the index (document, kind, field,
 * value), and the variants taking the field from their base (value NULL); in id order after the
 * cursor. The other filters of the query narrow what the window found.
 */
async function inWindow(
  pool: pg.Pool,
  documentId: string,
  query: MemberQuery,
  range: NumberRange,
): Promise<FoundMember[]> {
  // Bounds left out bind NULL: the planner folds them away, its index range being the bounds given.
  const window =
    "n.value IS NOT NULL AND ($5::float8 IS NULL OR n.value >= $5) AND ($6::float8 IS NULL OR n.value < $6)";
  const numbers = (value: string) => `SELECT n.member_id, n.root, n.row_id FROM docscript_numbers n
     WHERE n.document_id = $1 AND ($2::text[] IS NULL OR ${sql.anyOf("n.kind", 2)}) AND n.field = $3
       AND ${value} AND n.member_id > $4`;
  // A window filtered by nothing but its kinds and cursor: the page is cut from the numbers before they
  // are joined to their members and rows (every number is written with its member, in one
  // transaction), so a page of a 33,000-marker window joins 5,000 rows, not all 33,000 sorted on disk
  // (0.5-0.6 s a page at 100k entities before).
  const pageFirst =
    query.ids === undefined &&
    query.variantOf === undefined &&
    query.variantsOf === undefined &&
    query.identity === undefined &&
    query.identities === undefined;
  const union = `${numbers(window)} UNION ALL ${numbers("n.value IS NULL")}`;
  const page = [
    documentId,
    listOrNull(query.kinds),
    range.field,
    query.after ?? "",
    range.from ?? null,
    range.to ?? null,
    query.limit,
  ];
  if (pageFirst) {
    // Each of the page's members and rows probed in its index: left to itself, the planner misjudged
    // the window (3,800 numbers for 33,000) and hashed all 100,000 rows of the document (0.4 s a page).
    const result = await pool.query<MemberRecord>(
      `SELECT ${memberColumns}
       FROM (SELECT c.* FROM (${union}) c ORDER BY c.member_id, c.row_id LIMIT $7) w
       CROSS JOIN LATERAL (SELECT * FROM docscript_members m WHERE m.document_id = $1 AND m.type = 'entity'
         AND m.member_id = w.member_id AND m.root = w.root AND m.row_id = w.row_id OFFSET 0) m
       ${rowProbe}
       ORDER BY m.member_id, m.row_id LIMIT $7`,
      page,
    );
    return result.rows.map(toMember);
  }
  const result = await pool.query<MemberRecord>(
    `SELECT ${memberColumns}
     FROM (${union}) w
     JOIN docscript_members m ON m.document_id = $1 AND m.type = 'entity' AND m.member_id = w.member_id
       AND m.root = w.root AND m.row_id = w.row_id
     ${withRows}
     WHERE ($8::text[] IS NULL OR ${sql.anyOf("m.member_id", 8)})
       AND ($9::text IS NULL OR m.variant_of = $9)
       AND ($10::text IS NULL OR m.identity = $10)
       AND ($11::text[] IS NULL OR ${sql.anyOf("m.variant_of", 11)})
       AND ($12::text[] IS NULL OR ${sql.anyOf("m.identity", 12)})
     ORDER BY m.member_id, m.row_id LIMIT $7`,
    [
      ...page,
      listOrNull(query.ids),
      query.variantOf ?? null,
      query.identity ?? null,
      listOrNull(query.variantsOf),
      listOrNull(query.identities),
    ],
  );
  return result.rows.map(toMember);
}

/**
 * A holder's relations of one kind in order of position, then id (`MemberQuery.ordered`), from the
 * index of positions (migration 10): the expression is the index's, so the planner walks it.
 */
async function ordered(
  pool: pg.Pool,
  documentId: string,
  by: OrderedQuery,
  limit: number,
): Promise<FoundMember[]> {
  const direction = by.from === "first" ? "ASC" : "DESC";
  const result = await pool.query<MemberRecord>(
    `SELECT ${memberColumns}
     FROM docscript_rows r
     JOIN docscript_members m ON m.document_id = r.document_id AND m.root = r.root AND m.row_id = r.row_id
       AND m.type = 'relation' AND m.member_id = r.row_id
     WHERE r.document_id = $1 AND r.root = 'relations' AND r.endpoint0 IS NOT NULL AND r.endpoint0 = $2
       AND r.kind = $3
     ORDER BY (${postgresPosition}) ${direction}, r.row_id ${direction} LIMIT $4`,
    [documentId, by.holder, by.kind, limit],
  );
  return result.rows.map(toMember);
}
