/**
 * The SQLite store's reads of entities and relations with their rows: one statement per set of filters
 * given (prepared once), so SQLite takes the index that finds the few rows asked for — by endpoint,
 * variant, identity, id, kind, or a window on a number field (migration 7).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { FoundMember, MemberQuery } from "./document-store.ts";
import { type MemberRecord, toMember } from "./member-record.ts";

export interface SqliteMemberReads {
  readMembers(documentId: string, query: MemberQuery): FoundMember[];
  numbersIndexed(documentId: string): boolean;
}

/** Which filters a query gives: one prepared statement per combination. */
interface Filters {
  kinds: boolean;
  ids: boolean;
  endpoint: boolean;
  endpoints: boolean;
  variantOf: boolean;
  variantsOf: boolean;
  identity: boolean;
  identities: boolean;
  /** A window: on its field, with a lower and an upper bound or not. */
  range: boolean;
  from: boolean;
  to: boolean;
}

export function sqliteMemberReads(database: DatabaseSync): SqliteMemberReads {
  const statements = new Map<string, StatementSync>();
  const selectNumbersIndexed = database.prepare(
    "SELECT numbers_indexed FROM docscript_projection WHERE document_id = ?",
  );
  const numbersIndexed = (documentId: string): boolean => {
    const row = selectNumbersIndexed.get(documentId) as { numbers_indexed: number } | undefined;
    return row !== undefined && Number(row.numbers_indexed) === 1;
  };
  const statement = (by: Filters): StatementSync => {
    const key = JSON.stringify(by);
    const known = statements.get(key);
    if (known !== undefined) return known;
    const prepared = database.prepare(memberSql(by));
    statements.set(key, prepared);
    return prepared;
  };
  return {
    numbersIndexed,
    readMembers(documentId, query) {
      // A window on a document stored before the index: every entity of the kinds is a candidate.
      const range = query.range !== undefined && numbersIndexed(documentId) ? query.range : undefined;
      const by: Filters = {
        kinds: query.kinds !== undefined,
        ids: query.ids !== undefined,
        endpoint: query.endpoint !== undefined,
        endpoints: query.endpoints !== undefined,
        variantOf: query.variantOf !== undefined,
        variantsOf: query.variantsOf !== undefined,
        identity: query.identity !== undefined,
        identities: query.identities !== undefined,
        range: range !== undefined,
        from: range?.from !== undefined,
        to: range?.to !== undefined,
      };
      const parameters: Record<string, string | number> = {
        documentId,
        type: query.type,
        after: query.after ?? "",
        limit: query.limit,
      };
      const json = (values: readonly string[]) => JSON.stringify(values);
      if (query.kinds !== undefined) parameters.kinds = json(query.kinds);
      if (query.ids !== undefined) parameters.ids = json(query.ids);
      if (query.endpoint !== undefined) parameters.endpoint = query.endpoint;
      if (query.endpoints !== undefined) parameters.endpoints = json(query.endpoints);
      if (query.variantOf !== undefined) parameters.variantOf = query.variantOf;
      if (query.variantsOf !== undefined) parameters.variantsOf = json(query.variantsOf);
      if (query.identity !== undefined) parameters.identity = query.identity;
      if (query.identities !== undefined) parameters.identities = json(query.identities);
      if (range !== undefined) {
        parameters.field = range.field;
        if (range.from !== undefined) parameters.from = range.from;
        if (range.to !== undefined) parameters.to = range.to;
      }
      const rows = statement(by).all(parameters) as unknown as MemberRecord[];
      return rows.map(toMember);
    },
  };
}

/**
 * The statement for one set of filters: each an equality or a JSON array it names only when given.
 * `+` keeps SQLite off the primary key's (document, type, id) range where another index applies.
 */
function memberSql(by: Filters): string {
  const indexed =
    by.endpoint || by.endpoints || by.variantOf || by.variantsOf || by.identity || by.identities;
  const plus = indexed || by.range ? "+" : "";
  // With ids, the cursor is filtered, not searched: as a range it has SQLite walk every member of
  // the type past it and test each against the ids (2 ms a lookup at 100k), not find the ids.
  const where = [`${plus}m.type = :type`, `${plus || by.ids ? "+" : ""}m.member_id > :after`];
  if (by.kinds) where.push(`${by.range ? "+" : ""}m.kind IN (SELECT value FROM json_each(:kinds))`);
  if (by.ids) where.push("m.member_id IN (SELECT value FROM json_each(:ids))");
  if (by.variantOf) where.push("m.variant_of = :variantOf");
  if (by.variantsOf)
    where.push("m.variant_of IS NOT NULL AND m.variant_of IN (SELECT value FROM json_each(:variantsOf))");
  if (by.identity) where.push("m.identity = :identity");
  if (by.identities)
    where.push("m.identity IS NOT NULL AND m.identity IN (SELECT value FROM json_each(:identities))");
  if (!by.endpoint && !by.endpoints && !by.range) where.unshift("m.document_id = :documentId");
  return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, r.payload
     FROM ${memberSource(by)} m
     JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
     WHERE ${where.join(" AND ")}
     ORDER BY m.member_id, m.row_id LIMIT :limit`;
}

/** Where the members come from: an endpoint index (both ends, unioned), the window index, or the table. */
function memberSource(by: Filters): string {
  if (by.endpoint)
    return `(SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint0 = :endpoint
          UNION ALL
          SELECT * FROM docscript_members
          WHERE document_id = :documentId AND endpoint1 = :endpoint AND endpoint0 IS NOT :endpoint)`;
  if (by.endpoints)
    return `(SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint0 IS NOT NULL
              AND endpoint0 IN (SELECT value FROM json_each(:endpoints))
            UNION ALL
            SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint1 IS NOT NULL
              AND endpoint1 IN (SELECT value FROM json_each(:endpoints))
              AND (endpoint0 IS NULL OR endpoint0 NOT IN (SELECT value FROM json_each(:endpoints))))`;
  if (!by.range) return "docscript_members";
  // The window's numbers (document, kind, field, value), then the variants taking the field from
  // their base (value NULL), each joined to its member by the member table's primary key.
  const kinds = by.kinds ? "AND n.kind IN (SELECT value FROM json_each(:kinds))" : "";
  const bounds = [
    ...(by.from ? ["n.value >= :from"] : []),
    ...(by.to ? ["n.value < :to"] : []),
    ...(!by.from && !by.to ? ["n.value IS NOT NULL"] : []),
  ].join(" AND ");
  const numbers = (value: string) => `SELECT n.member_id, n.root, n.row_id FROM docscript_numbers n
       WHERE n.document_id = :documentId ${kinds} AND n.field = :field AND ${value}
         AND +n.member_id > :after`;
  return `(SELECT m0.* FROM (${numbers(bounds)} UNION ALL ${numbers("n.value IS NULL")}) w
       JOIN docscript_members m0 ON m0.document_id = :documentId AND m0.type = 'entity'
         AND m0.member_id = w.member_id AND m0.root = w.root AND m0.row_id = w.row_id)`;
}
