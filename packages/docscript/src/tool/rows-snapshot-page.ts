/**
 * A `snapshot` page by `related_to`, a time window or `kinds` with relations, read from a row source
 * (ADR 0485): the document server's stored rows (`POST /documents/:id/rows`), or the tool's replica.
 * The rows the query can match are looked up into a projection holding only them, and the page
 * function answers over it, so the page costs what the query's matches cost, not the document. From
 * the server, a query that would look up more than the bounds below is `Unbounded` (the caller asks
 * the replica of a small document, without bounds, or refuses `read_limit`): no page is ever cut
 * silently.
 */
import type { DocumentClient } from "../client/create-document-client.ts";
import { Projection } from "../document/projection.ts";
import { replicaRowSource } from "../document/replica-rows.ts";
import { lookupRowSource, type RowSource } from "../document/row-source.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import type { EntityPage, RowLookup } from "../server/document-host.ts";
import {
  matchingEntityIds,
  ProjectionIndex,
  type SnapshotPage,
  type SnapshotQuery,
  snapshotPage,
} from "./snapshot-page.ts";

const lookupsPerRequest = 64;
const idsPerLookup = 1000;
const membersPerPage = 5000;
/** The most entities or relations one page lists by kind or endpoint to know what it matches (20 pages). */
export const maxScanned = 100_000;
/** The most entities whose relations (or markers) a page looks up one by one (64 per request). */
export const maxEndpointLookups = 5000;

/** How much one page may look up: members listed, and entities whose relations are read one by one. */
export interface PageBounds {
  readonly scanned: number;
  readonly endpointLookups: number;
}

const serverBounds: PageBounds = { scanned: maxScanned, endpointLookups: maxEndpointLookups };
const unbounded: PageBounds = {
  scanned: Number.POSITIVE_INFINITY,
  endpointLookups: Number.POSITIVE_INFINITY,
};

/** Where a page reads: the version, totals, counts and issues first, then rows at that version. */
export interface PageRows {
  head(): Promise<Pick<EntityPage, "version" | "total" | "counts" | "issues">>;
  readonly rows: RowSource;
  readonly bounds: PageBounds;
}

/** The document server's stored rows, within the bounds above. */
export function serverPageRows(client: DocumentClient, docId: string): PageRows {
  return {
    head: () => client.entities(docId, { limit: 0 }),
    rows: lookupRowSource((lookups) => client.rows(docId, lookups)),
    bounds: serverBounds,
  };
}

/** The tool's replica, read whole already (its projection and issues), without bounds. */
export function replicaPageRows(
  projection: Projection,
  version: string,
  issues: readonly DocumentIssue[],
): PageRows {
  const counts = { entities: {} as Record<string, number>, relations: {} as Record<string, number> };
  const total = { entities: 0, relations: 0 };
  for (const entityId of projection.entityIds()) {
    const kind = projection.stored(entityId)?.entityKind ?? "";
    counts.entities[kind] = (counts.entities[kind] ?? 0) + 1;
    total.entities += 1;
  }
  for (const relation of projection.relationsOfKind(undefined)) {
    counts.relations[relation.relationKind] = (counts.relations[relation.relationKind] ?? 0) + 1;
    total.relations += 1;
  }
  return {
    head: async () => ({ version, total, counts, issues: [...issues] }),
    rows: replicaRowSource(projection, version),
    bounds: unbounded,
  };
}

/** The query reads more than the bounds: `message` says what; `entities` is the document's count. */
export class Unbounded extends Error {
  entities = 0;
}

class VersionMoved extends Error {}

/** Looks rows up into a projection that holds only them, all at one version. */
class RowReader {
  readonly projection: Projection;
  version: string | undefined;
  private readonly source: RowSource;
  readonly bounds: PageBounds;
  private readonly endpointsRead = new Set<string>();

  constructor(schema: Schema, source: RowSource, bounds: PageBounds) {
    this.projection = new Projection(schema);
    this.source = source;
    this.bounds = bounds;
  }

  /** Asks the lookups (64 a request), holds the rows found; the answers' `found` and `last`. */
  async ask(lookups: readonly RowLookup[]) {
    const results = [];
    for (let start = 0; start < lookups.length; start += lookupsPerRequest) {
      const answer = await this.source.lookUp(lookups.slice(start, start + lookupsPerRequest));
      if (this.version !== undefined && answer.version !== this.version) throw new VersionMoved();
      this.version = answer.version;
      for (const result of answer.results) {
        for (const row of result.rows)
          if (row.root === "entities") {
            if (this.projection.row(row.rowId) === undefined) this.projection.setRow(row.rowId, row.json);
          } else if (this.projection.relationJson(row.rowId) === undefined)
            this.projection.setRelationRow(row.rowId, row.json);
        results.push(result);
      }
    }
    return results;
  }

  /** Every member a query finds, page after page; `Unbounded` past `bound`. */
  async members(lookup: Extract<RowLookup, { members: string }>, bound: number, narrow: string) {
    let after: string | undefined;
    let found = 0;
    for (;;) {
      const [result] = await this.ask([
        { ...lookup, ...(after === undefined ? {} : { after }), limit: membersPerPage },
      ]);
      found += result!.found;
      if (found > bound) throw new Unbounded(narrow);
      if (result!.found < membersPerPage || result!.last === undefined) return;
      after = result!.last;
    }
  }

  /** Holds the entities named (and the bases of variants among them). */
  async entities(ids: Iterable<string>): Promise<void> {
    let wanted = [...new Set(ids)].filter((id) => this.projection.stored(id) === undefined);
    for (let round = 0; wanted.length > 0 && round < 8; round++) {
      const lookups: RowLookup[] = [];
      for (let start = 0; start < wanted.length; start += idsPerLookup)
        lookups.push({
          members: "entity",
          ids: wanted.slice(start, start + idsPerLookup),
          limit: idsPerLookup,
        });
      await this.ask(lookups);
      wanted = wanted
        .map((id) => this.projection.stored(id)?.variantOf)
        .filter((base): base is string => base !== undefined && this.projection.stored(base) === undefined);
    }
  }

  /** Holds every relation touching each entity (of `kinds` when given). */
  async relationsOf(ids: Iterable<string>, kinds?: readonly string[]): Promise<void> {
    const key = (id: string) => `${id}\u0000${kinds?.join("\u0000") ?? ""}`;
    const wanted = [...new Set(ids)].filter(
      (id) => !this.endpointsRead.has(key(id)) && !this.endpointsRead.has(`${id}\u0000`),
    );
    if (wanted.length > this.bounds.endpointLookups) throw new Unbounded("");
    const lookups: RowLookup[] = wanted.map((endpoint) => ({
      members: "relation",
      endpoint,
      ...(kinds === undefined ? {} : { kinds }),
      limit: membersPerPage,
    }));
    const results = await this.ask(lookups);
    for (const [index, id] of wanted.entries()) {
      this.endpointsRead.add(key(id));
      // A rare entity with more relations than one lookup answers: read the rest page by page.
      const result = results[index]!;
      if (result.found >= membersPerPage && result.last !== undefined)
        await this.members(
          {
            members: "relation",
            endpoint: id,
            ...(kinds === undefined ? {} : { kinds }),
            after: result.last,
            limit: membersPerPage,
          },
          this.bounds.scanned,
          `${id} has more than ${this.bounds.scanned} relations`,
        );
    }
  }
}

export const narrowHint =
  'narrow the query: add `ids`, `kinds` with `include: "entities"`, `relation_kinds`, or a shorter time window';

/**
 * Looks up what `query` can match and answers its page over those rows. Throws `Unbounded` when that
 * is more than the bounds allow.
 */
export async function lookupSnapshotPage(
  schema: Schema,
  rows: PageRows,
  query: SnapshotQuery,
  budget: number,
): Promise<SnapshotPage & { version: string }> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await readPage(schema, rows, query, budget);
    } catch (error) {
      if (!(error instanceof VersionMoved)) throw error;
      if (attempt >= 2)
        throw new DocScriptError(
          "document_changed",
          "the document kept changing while the page was read; ask again",
        );
    }
  }
}

async function readPage(
  schema: Schema,
  rows: PageRows,
  query: SnapshotQuery,
  budget: number,
): Promise<SnapshotPage & { version: string }> {
  // The version, totals and issues first: every row read after must be of this version.
  const head = await rows.head();
  try {
    return await readRows(new RowReader(schema, rows.rows, rows.bounds), query, budget, head);
  } catch (error) {
    if (error instanceof Unbounded) error.entities = head.total.entities;
    throw error;
  }
}

async function readRows(
  reader: RowReader,
  query: SnapshotQuery,
  budget: number,
  head: Pick<EntityPage, "version" | "total" | "counts" | "issues">,
): Promise<SnapshotPage & { version: string }> {
  const { scanned, endpointLookups } = reader.bounds;
  reader.version = head.version;
  const projection = reader.projection;
  const include = query.include ?? "both";
  const listRelations = include !== "entities";
  const timed = query.from_ms !== undefined || query.to_ms !== undefined;
  const counted = (kinds: readonly string[], counts: Readonly<Record<string, number>>) =>
    [...new Set(kinds)].reduce((total, kind) => total + (counts[kind] ?? 0), 0);

  // The entities the query can match: named, related, timed (markers and what they mark), or of kinds.
  let candidates: string[];
  if (query.related_to !== undefined) {
    const related = query.related_to;
    await reader.members(
      {
        members: "relation",
        endpoint: related,
        ...(query.relation_kinds === undefined ? {} : { kinds: query.relation_kinds }),
        limit: membersPerPage,
      },
      scanned,
      `${related} has more than ${scanned} relations${query.relation_kinds === undefined ? " (add relation_kinds)" : ""}`,
    );
    candidates = projection
      .relationsOf(related)
      .flatMap((relation) => [relation.endpoint0EntityId, relation.endpoint1EntityId])
      .filter((id) => id !== related);
    if (query.ids !== undefined) candidates = [...new Set(query.ids)];
  } else if (query.ids !== undefined) {
    candidates = [...new Set(query.ids)];
  } else if (timed) {
    const markers = counted(["sequence-marker"], head.counts.entities);
    const marked = counted(["marker"], head.counts.relations);
    if (markers > scanned || marked > scanned)
      throw new Unbounded(
        `a time window reads every marker, and this document has ${markers} (more than ${scanned})`,
      );
    await reader.members(
      { members: "entity", kinds: ["sequence-marker"], limit: membersPerPage },
      scanned,
      "",
    );
    await reader.members({ members: "relation", kinds: ["marker"], limit: membersPerPage }, scanned, "");
    candidates = [...projection.entityIds()].filter(
      (id) => projection.stored(id)?.entityKind === "sequence-marker",
    );
    for (const relationId of [...projection.relationIds()]) {
      const relation = projection.storedRelation(relationId);
      if (relation?.relationKind === "marker") candidates.push(relation.endpoint0EntityId);
    }
  } else {
    const kinds = query.kinds ?? [];
    const matched = counted(kinds, head.counts.entities);
    if (matched > endpointLookups)
      throw new Unbounded(`kinds with relations match ${matched} entities (more than ${endpointLookups})`);
    for (const kind of new Set(kinds))
      await reader.members({ members: "entity", kinds: [kind], limit: membersPerPage }, scanned, "");
    candidates = [...projection.entityIds()].filter((id) =>
      kinds.includes(projection.stored(id)?.entityKind ?? ""),
    );
  }
  // Relations of `related_to` alone match by their endpoint: no entity row is needed.
  if (query.related_to !== undefined && include === "relations") candidates = [];
  await reader.entities(candidates);

  // A time window reads each candidate's marker (a clip's is usually in its own row).
  if (timed && (query.ids !== undefined || query.related_to !== undefined)) {
    if (candidates.length > endpointLookups)
      throw new Unbounded(
        `the query reads the markers of ${candidates.length} entities (more than ${endpointLookups})`,
      );
    await reader.relationsOf(candidates, ["marker"]);
    await reader.entities(
      candidates.flatMap((id) =>
        projection.relationsOf(id, "marker").map((relation) => relation.endpoint1EntityId),
      ),
    );
  }

  const index = new ProjectionIndex(projection);
  // The relations of what matched (those of `related_to` are held already).
  if (listRelations && query.related_to === undefined) {
    const ids = matchingEntityIds(index, query);
    if (ids.length > endpointLookups)
      throw new Unbounded(
        `the query lists the relations of ${ids.length} entities (more than ${endpointLookups})`,
      );
    await reader.relationsOf(ids);
    index.changed();
  }

  const issues = head.issues;
  const page = snapshotPage(index, issues, query, budget);
  return { ...page, version: reader.version ?? head.version, total: head.total };
}
