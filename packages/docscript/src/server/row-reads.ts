/**
 * What the document server answers from its store's rows, never the Loro document: pages of entities
 * and relations, row lookups for a reader that holds only what it looked up (ADR 0466), the kinds'
 * counts, and entities as a reader sees them (a variant's base under its own fields).
 */
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import type { DocumentStore, FoundMember, MemberQuery, RowRoot } from "./document-store.ts";
import { storedEntityOf } from "./row-members.ts";

/** A page of entities read from the store's rows, with the document's version and issues. */
export interface EntityPage {
  readonly version: string;
  readonly total: { readonly entities: number; readonly relations: number };
  /** Entities and relations per kind. */
  readonly counts: PageCounts;
  readonly entities: Entity[];
  readonly issues: DocumentIssue[];
}

/** A page of relations read from the store's rows. */
export interface RelationPage {
  readonly version: string;
  readonly total: { readonly entities: number; readonly relations: number };
  readonly counts: PageCounts;
  readonly relations: Relation[];
}

export interface PageCounts {
  readonly entities: Readonly<Record<string, number>>;
  readonly relations: Readonly<Record<string, number>>;
}

/**
 * One lookup of stored rows (`POST /documents/:id/rows`, ADR 0466): rows by id, or the members a
 * query finds (with the rows they live in), as a tool's projection reads them on demand. A members
 * lookup may name many entities at once — relations with any of `endpoints` as an end, variants of
 * any of `variantsOf`, entities of any of `identities` — so a reader asks for a whole call's worth in
 * one request; fewer found than its limit means each of them was answered whole. A `range` reads the
 * entities of a kind in a window on a number field from the store's index (candidates: the reader
 * checks each as it sees it).
 */
export type RowLookup =
  | { readonly rows: RowRoot; readonly ids: readonly string[] }
  | ({
      readonly members: MemberQuery["type"];
      /**
       * An entities lookup: with every row claiming the entities it found and their variants
       * (`claimed`), as lookups of their ids and variants would answer, so a listing reads its
       * entities in one request, not two.
       */
      readonly claims?: boolean;
    } & Omit<MemberQuery, "type">);

/**
 * The rows each lookup found, at the document's version, with the kinds' counts (and the document's
 * issues when asked for: a page reads its head and its first rows in one request).
 */
export interface RowLookupAnswer {
  readonly version: string;
  readonly counts: PageCounts;
  readonly issues?: DocumentIssue[];
  readonly results: readonly {
    /** The rows found, each with its JSON; named only (no `json`) for a `bare` members lookup. */
    readonly rows: readonly { readonly root: RowRoot; readonly rowId: string; readonly json?: unknown }[];
    /** Members found (a member lookup): fewer than its limit means there are no more. */
    readonly found: number;
    /** The last member id found, to read the next page after. */
    readonly last?: string;
    /** With `claims`: the entities found whose every claiming row and every variant is among `rows`. */
    readonly claimed?: readonly string[];
  }[];
}

/** At most this many lookups per request, ids per lookup and members per lookup. */
export const rowLookupLimits = { lookups: 64, ids: 1000, members: 5000 } as const;

type StoredRow = { root: RowRoot; rowId: string; json?: unknown };

/** The members one lookup finds: one store query (many endpoints, variant bases or identities at once). */
async function membersOf(
  store: DocumentStore,
  documentId: string,
  lookup: Extract<RowLookup, { members: string }>,
): Promise<FoundMember[]> {
  const { members, claims: _claims, ...query } = lookup;
  return store.readMembers(documentId, { ...query, type: members });
}

/**
 * Every row claiming the entities `found` lists (a `claims` lookup), and every variant of them, added
 * to `rows`: the entities answered whole so, or none when either read found as many as it may return.
 */
async function claimsOf(
  store: DocumentStore,
  documentId: string,
  found: readonly FoundMember[],
  bare: boolean,
  rows: Map<string, StoredRow>,
): Promise<string[]> {
  const ids = [...new Set(found.map((member) => member.id))];
  if (ids.length === 0) return [];
  // A row claims its own id and its embedded entities': more claims than that are conflicts, rare.
  const limit = ids.length + rowLookupLimits.lookups;
  // Asked bare: the claiming rows are mostly the ones found (a window's 5,000 rows were read and parsed
  // twice), and only those not among them are read, by id.
  const claims = await store.readMembers(documentId, { type: "entity", ids, limit, bare: true });
  const variants = await store.readMembers(documentId, {
    type: "entity",
    variantsOf: ids,
    limit,
    bare: true,
  });
  const lacking = new Map<RowRoot, Set<string>>();
  for (const member of [...claims, ...variants]) {
    const key = `${member.root}\u0000${member.rowId}`;
    if (rows.has(key)) continue;
    if (bare) rows.set(key, { root: member.root, rowId: member.rowId });
    else lacking.set(member.root, (lacking.get(member.root) ?? new Set()).add(member.rowId));
  }
  for (const [root, rowIds] of lacking)
    for (const row of await store.readRows(documentId, { root, ids: [...rowIds], limit: rowIds.size }))
      rows.set(`${row.root}\u0000${row.rowId}`, { root: row.root, rowId: row.rowId, json: row.json });
  return claims.length >= limit || variants.length >= limit ? [] : ids;
}

/** Stored rows by id, or by the members each query finds. */
export async function lookUpRows(
  store: DocumentStore,
  documentId: string,
  lookups: readonly RowLookup[],
): Promise<RowLookupAnswer["results"][number][]> {
  // Each lookup is its own statements: sent together, a store with a pool of connections answers
  // them side by side (PostgreSQL: a round trip each, overlapped); SQLite answers them in turn anyway.
  return Promise.all(lookups.map((lookup) => lookUp(store, documentId, lookup)));
}

async function lookUp(
  store: DocumentStore,
  documentId: string,
  lookup: RowLookup,
): Promise<RowLookupAnswer["results"][number]> {
  if ("rows" in lookup) {
    const found = await store.readRows(documentId, {
      root: lookup.rows,
      ids: lookup.ids,
      limit: lookup.ids.length,
    });
    return {
      rows: found.map((row) => ({ root: row.root, rowId: row.rowId, json: row.json })),
      found: found.length,
    };
  }
  const found = await membersOf(store, documentId, lookup);
  const rows = new Map<string, StoredRow>();
  for (const member of found)
    rows.set(
      `${member.root}\u0000${member.rowId}`,
      lookup.bare === true
        ? { root: member.root, rowId: member.rowId }
        : { root: member.root, rowId: member.rowId, json: member.json },
    );
  const claimed =
    lookup.claims === true && lookup.members === "entity"
      ? await claimsOf(store, documentId, found, lookup.bare === true, rows)
      : undefined;
  const last = found.at(-1)?.id;
  return {
    rows: [...rows.values()],
    found: found.length,
    ...(last === undefined ? {} : { last }),
    ...(claimed === undefined ? {} : { claimed }),
  };
}

/** Entities and relations per kind, as the store counts them with every write of its rows. */
export async function totalsOf(
  store: DocumentStore,
  documentId: string,
): Promise<{ total: { entities: number; relations: number }; counts: PageCounts }> {
  const counts = { entities: {} as Record<string, number>, relations: {} as Record<string, number> };
  const total = { entities: 0, relations: 0 };
  for (const row of await store.countMembers(documentId)) {
    const section = row.type === "entity" ? "entities" : "relations";
    counts[section][row.kind] = row.count;
    total[section] += row.count;
  }
  return { total, counts };
}

/** Entities as a reader sees them: a variant's base (read from the store too) under its own fields. */
export async function assembledEntities(
  store: DocumentStore,
  schema: Schema,
  documentId: string,
  found: readonly FoundMember[],
): Promise<Entity[]> {
  const read = found.map((member) => storedEntityOf(schema, member)).filter((entry) => entry !== undefined);
  const bases = new Map<string, { entity: Entity; own: Readonly<Record<string, unknown>> }>();
  for (const entry of read) bases.set(entry.entity.entityId, entry);
  for (let depth = 0; depth < 16; depth++) {
    const missing = [...bases.values()]
      .map((entry) => entry.entity.variantOf)
      .filter((id): id is string => id !== undefined && !bases.has(id));
    if (missing.length === 0) break;
    const more = await store.readMembers(documentId, {
      type: "entity",
      ids: [...new Set(missing)],
      limit: missing.length * 2,
    });
    for (const member of firstClaims(more)) {
      const entry = storedEntityOf(schema, member);
      if (entry !== undefined) bases.set(member.id, entry);
    }
    if (more.length === 0) break;
  }
  const payloadOf = (entityId: string, seen: Set<string>): Record<string, unknown> => {
    const entry = bases.get(entityId);
    if (entry === undefined) return {};
    const baseId = entry.entity.variantOf;
    if (baseId === undefined || seen.has(entityId)) return { ...entry.own };
    seen.add(entityId);
    return { ...payloadOf(baseId, seen), ...entry.own };
  };
  return read.map((entry) => ({ ...entry.entity, payload: payloadOf(entry.entity.entityId, new Set()) }));
}

/** One member per id: the first claim (two rows claiming one id is a conflict the check names). */
export function firstClaims(found: readonly FoundMember[]): FoundMember[] {
  const seen = new Set<string>();
  return found.filter((member) => {
    if (seen.has(member.id)) return false;
    seen.add(member.id);
    return true;
  });
}
