/**
 * The SQLite store's reads of entities and relations with their rows: one statement per set of filters
 * given (prepared once), so SQLite takes the index that finds the few rows asked for — by endpoint,
 * variant, identity, id, kind, or a window on a number field (migration 7).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { sqliteDialect as sql } from "@tackle/storage";
import type { FoundMember, MemberQuery, OrderedQuery } from "./document-store.ts";
import { type MemberRecord, toMember } from "./member-record.ts";
import { sqlitePosition } from "./migrations.ts";

export interface SqliteMemberReads {
  readMembers(documentId: string, query: MemberQuery): FoundMember[];
  numbersIndexed(documentId: string): boolean;
}

/** Which filters a query gives: one prepared statement per combination. */
export interface Filters {
  kinds: boolean;
  /**
   * One kind and no other filter: an equality, so SQLite walks the kind index in id order and stops
   * at the limit. Given as a list, it walked every member of the type by id instead (0.4 s at 100k).
   */
  oneKind: boolean;
  ids: boolean;
  endpoint: boolean;
  endpoints: boolean;
  variantOf: boolean;
  variantsOf: boolean;
  identity: boolean;
  identities: boolean;
  /** Members only, their rows not joined (`MemberQuery.bare`). */
  bare: boolean;
  /** A window: on its field, with a lower and an upper bound or not. */
  range: boolean;
  from: boolean;
  to: boolean;
}

/**
 * Each value's parameter number, the same in every statement (ADR 0008: numbered parameters, lists
 * through the dialect's `anyOf`); a statement binds the values up to the highest number it names.
 */
const at = {
  documentId: 1,
  type: 2,
  after: 3,
  limit: 4,
  kinds: 5,
  ids: 6,
  endpoint: 7,
  endpoints: 8,
  variantOf: 9,
  variantsOf: 10,
  identity: 11,
  identities: 12,
  field: 13,
  from: 14,
  to: 15,
} as const;
type Parameter = keyof typeof at;
/** The names in parameter order (`at` numbers them 1, 2, 3, … as written). */
const parameterNames = Object.keys(at) as Parameter[];
/** The parameter `name` in a statement: `?n`. */
const p = (name: Parameter): string => sql.param(at[name]);
/** `column` is one of the list bound as `name`. */
const anyOf = (column: string, name: Parameter): string => sql.anyOf(column, at[name]);

/** A prepared statement and how many parameters it binds. */
interface Prepared {
  readonly statement: StatementSync;
  readonly parameters: number;
}

export function sqliteMemberReads(database: DatabaseSync): SqliteMemberReads {
  const statements = new Map<string, Prepared>();
  const selectNumbersIndexed = database.prepare(
    "SELECT numbers_indexed FROM docscript_projection WHERE document_id = ?",
  );
  const numbersIndexed = (documentId: string): boolean => {
    const row = selectNumbersIndexed.get(documentId) as { numbers_indexed: number } | undefined;
    return row !== undefined && Number(row.numbers_indexed) === 1;
  };
  const statement = (by: Filters): Prepared => {
    const key = JSON.stringify(by);
    const known = statements.get(key);
    if (known !== undefined) return known;
    const text = memberSql(by);
    const numbers = [...text.matchAll(/\?(\d+)/g)].map((match) => Number(match[1]));
    const prepared = { statement: database.prepare(text), parameters: Math.max(...numbers) };
    statements.set(key, prepared);
    return prepared;
  };
  const orderedStatements = {
    first: database.prepare(orderedSql("ASC")),
    last: database.prepare(orderedSql("DESC")),
  };
  const ordered = (documentId: string, by: OrderedQuery, limit: number): FoundMember[] =>
    (orderedStatements[by.from].all(documentId, by.holder, by.kind, limit) as unknown as MemberRecord[]).map(
      toMember,
    );
  return {
    numbersIndexed,
    readMembers(documentId, query) {
      if (query.ordered !== undefined) return ordered(documentId, query.ordered, query.limit);
      // A window on a document stored before the index: every entity of the kinds is a candidate.
      const range = query.range !== undefined && numbersIndexed(documentId) ? query.range : undefined;
      const oneKind =
        query.kinds?.length === 1 &&
        range === undefined &&
        [
          query.ids,
          query.endpoint,
          query.endpoints,
          query.variantOf,
          query.variantsOf,
          query.identity,
          query.identities,
        ].every((filter) => filter === undefined);
      const by: Filters = {
        kinds: query.kinds !== undefined,
        oneKind,
        ids: query.ids !== undefined,
        endpoint: query.endpoint !== undefined,
        endpoints: query.endpoints !== undefined,
        variantOf: query.variantOf !== undefined,
        variantsOf: query.variantsOf !== undefined,
        identity: query.identity !== undefined,
        identities: query.identities !== undefined,
        bare: query.bare === true,
        range: range !== undefined,
        from: range?.from !== undefined,
        to: range?.to !== undefined,
      };
      const values: Partial<Record<Parameter, unknown>> = {
        documentId,
        type: query.type,
        after: query.after ?? "",
        limit: query.limit,
        kinds: query.kinds === undefined ? undefined : oneKind ? query.kinds[0] : sql.list(query.kinds),
        ids: query.ids === undefined ? undefined : sql.list(query.ids),
        endpoint: query.endpoint,
        endpoints: query.endpoints === undefined ? undefined : sql.list(query.endpoints),
        variantOf: query.variantOf,
        variantsOf: query.variantsOf === undefined ? undefined : sql.list(query.variantsOf),
        identity: query.identity,
        identities: query.identities === undefined ? undefined : sql.list(query.identities),
        field: range?.field,
        from: range?.from,
        to: range?.to,
      };
      const { statement: prepared, parameters } = statement(by);
      // Positional: the value numbered n at index n - 1; a value the statement does not name binds NULL.
      const bound = parameterNames
        .slice(0, parameters)
        .map((name) => (values[name] ?? null) as string | number | null);
      const rows = prepared.all(...bound) as unknown as MemberRecord[];
      return rows.map(toMember);
    },
  };
}

/**
 * The statement for one set of filters: each an equality or a JSON array it names only when given.
 * `+` keeps SQLite off the primary key's (document, type, id) range where another index applies.
 */
export function memberSql(by: Filters): string {
  const indexed =
    by.endpoint || by.endpoints || by.variantOf || by.variantsOf || by.identity || by.identities;
  const plus = indexed || by.range ? "+" : "";
  // With ids, the cursor is filtered, not searched: as a range it has SQLite walk every member of
  // the type past it and test each against the ids (2 ms a lookup at 100k), not find the ids.
  const where = [`${plus}m.type = ${p("type")}`, `${plus || by.ids ? "+" : ""}m.member_id > ${p("after")}`];
  if (by.oneKind) where.push(`m.kind = ${p("kinds")}`);
  else if (by.kinds) where.push(anyOf(`${by.range ? "+" : ""}m.kind`, "kinds"));
  if (by.ids) where.push(anyOf("m.member_id", "ids"));
  if (by.variantOf) where.push(`m.variant_of = ${p("variantOf")}`);
  if (by.variantsOf) where.push(`m.variant_of IS NOT NULL AND ${anyOf("m.variant_of", "variantsOf")}`);
  if (by.identity) where.push(`m.identity = ${p("identity")}`);
  if (by.identities) where.push(`m.identity IS NOT NULL AND ${anyOf("m.identity", "identities")}`);
  if (!by.endpoint && !by.endpoints && !by.range) where.unshift(`m.document_id = ${p("documentId")}`);
  if (by.endpoint) return endpointSql(where.slice(2));
  if (by.endpoints || (by.range && !by.bare))
    // The members of many endpoints (of a window) come unordered from their indexes: the page is taken
    // before the rows are joined, so a track of 30,000 clips asked for 100 joins 100 payloads, not
    // 30,000 (and a window of 33,000 markers paged by 5,000 joins each page's, not all left of it).
    return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, r.payload
     FROM (SELECT m.* FROM ${memberSource(by)} m
           WHERE ${where.join(" AND ")}
           ORDER BY m.member_id, m.row_id LIMIT ${p("limit")}) m
     JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
     ORDER BY m.member_id, m.row_id`;
  if (by.bare)
    return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, NULL AS payload
     FROM ${memberSource(by)} m
     WHERE ${where.join(" AND ")}
     ORDER BY m.member_id, m.row_id LIMIT ${p("limit")}`;
  return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, r.payload
     FROM ${memberSource(by)} m
     JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
     WHERE ${where.join(" AND ")}
     ORDER BY m.member_id, m.row_id LIMIT ${p("limit")}`;
}

/**
 * One endpoint's members (as endpoint0, then as endpoint1 of another holder), each end read in page
 * order from its index (migration 11: document, endpoint, type, id, row), the two merged and the page
 * taken before the rows are joined: a page of a track of 30,000 clips reads the page's members, not
 * the track's (ADR 0497). `rest`: the query's other filters.
 */
function endpointSql(rest: readonly string[]): string {
  const branch = (end: "endpoint0" | "endpoint1") => `SELECT * FROM (SELECT m.* FROM docscript_members m
       WHERE m.document_id = ${p("documentId")} AND m.${end} = ${p("endpoint")}
         ${end === "endpoint1" ? `AND m.endpoint0 IS NOT ${p("endpoint")}` : ""}
         AND m.type = ${p("type")} AND m.member_id > ${p("after")}
         ${rest.map((condition) => `AND ${condition}`).join(" ")}
       ORDER BY m.member_id, m.row_id LIMIT ${p("limit")})`;
  return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, r.payload
     FROM (${branch("endpoint0")} UNION ALL ${branch("endpoint1")}
           ORDER BY member_id, row_id LIMIT ${p("limit")}) m
     JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
     ORDER BY m.member_id, m.row_id`;
}

/** Where the members come from: an endpoint index (both ends, unioned), the window index, or the table. */
function memberSource(by: Filters): string {
  if (by.endpoint)
    return `(SELECT * FROM docscript_members WHERE document_id = ${p("documentId")} AND endpoint0 = ${p("endpoint")}
          UNION ALL
          SELECT * FROM docscript_members
          WHERE document_id = ${p("documentId")} AND endpoint1 = ${p("endpoint")} AND endpoint0 IS NOT ${p("endpoint")})`;
  if (by.endpoints)
    return `(SELECT * FROM docscript_members WHERE document_id = ${p("documentId")} AND endpoint0 IS NOT NULL
              AND ${anyOf("endpoint0", "endpoints")}
            UNION ALL
            SELECT * FROM docscript_members WHERE document_id = ${p("documentId")} AND endpoint1 IS NOT NULL
              AND ${anyOf("endpoint1", "endpoints")}
              AND (endpoint0 IS NULL OR NOT ${anyOf("endpoint0", "endpoints")}))`;
  if (!by.range) return "docscript_members";
  // The window's numbers (document, kind, field, value), then the variants taking the field from
  // their base (value NULL), each joined to its member by the member table's primary key.
  const kinds = by.kinds ? `AND ${anyOf("n.kind", "kinds")}` : "";
  const bounds = [
    ...(by.from ? [`n.value >= ${p("from")}`] : []),
    ...(by.to ? [`n.value < ${p("to")}`] : []),
    ...(!by.from && !by.to ? ["n.value IS NOT NULL"] : []),
  ].join(" AND ");
  const numbers = (value: string) => `SELECT n.member_id, n.root, n.row_id FROM docscript_numbers n
       WHERE n.document_id = ${p("documentId")} ${kinds} AND n.field = ${p("field")} AND ${value}
         AND +n.member_id > ${p("after")}`;
  const window = `${numbers(bounds)} UNION ALL ${numbers("n.value IS NULL")}`;
  // A window filtered by nothing but its kinds and cursor: the page is cut from the numbers before they
  // are joined to their members (every number is written with its member, in one transaction), so a
  // page of a 33,000-marker window joins 5,000 members, not 33,000 (~50 ms a page less at 100k).
  const pageFirst = !(by.ids || by.variantOf || by.variantsOf || by.identity || by.identities);
  const candidates = pageFirst
    ? `(SELECT * FROM (${window}) ORDER BY member_id, row_id LIMIT ${p("limit")})`
    : `(${window})`;
  // CROSS JOIN: the page's numbers stay the outer loop (left to itself, SQLite walks every entity
  // member and probes the page).
  return `(SELECT m0.* FROM ${candidates} w
       CROSS JOIN docscript_members m0 ON m0.document_id = ${p("documentId")} AND m0.type = 'entity'
         AND m0.member_id = w.member_id AND m0.root = w.root AND m0.row_id = w.row_id)`;
}

/**
 * A holder's relations of one kind in order of position, then id (`MemberQuery.ordered`), from the
 * index of positions (migration 10): the expression is the index's, so SQLite walks it, no sort.
 */
function orderedSql(direction: "ASC" | "DESC"): string {
  return `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
            m.identity, r.payload
     FROM docscript_rows r
     JOIN docscript_members m ON m.document_id = r.document_id AND m.root = r.root AND m.row_id = r.row_id
       AND m.type = 'relation' AND m.member_id = r.row_id
     WHERE r.document_id = ?1 AND r.root = 'relations' AND r.endpoint0 IS NOT NULL AND r.endpoint0 = ?2
       AND r.kind = ?3
     ORDER BY ${sqlitePosition} ${direction}, r.row_id ${direction} LIMIT ?4`;
}
