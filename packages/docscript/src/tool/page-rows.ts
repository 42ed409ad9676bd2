/**
 * Where a `snapshot` page reads (ADR 0485): its head (version, totals, the kinds' counts, issues) and
 * rows at that version, from a row source — the document server's stored rows within bounds, or the
 * tool's replica without — looked up into a projection that holds only them (`RowReader`).
 */
import type { DocumentClient } from "../client/create-document-client.ts";
import { Projection } from "../document/projection.ts";
import { replicaRowSource } from "../document/replica-rows.ts";
import {
  lookupRowSource,
  type PageCounts,
  type RowLookup,
  type RowSource,
  type RowSourceAnswer,
} from "../document/row-source.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue } from "../schema/types.ts";

const lookupsPerRequest = 64;
const idsPerLookup = 1000;
export const membersPerPage = 5000;
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

/** What a page reads first: the document's version, totals, the kinds' counts and issues. */
export interface PageHead {
  readonly version: string;
  readonly total: { readonly entities: number; readonly relations: number };
  readonly counts: PageCounts;
  readonly issues: readonly DocumentIssue[];
}

export type LookupResults = RowSourceAnswer["results"];

/** Where a page reads: the head with the answers to its first lookups, then rows at that version. */
export interface PageRows {
  /** The head, and what `first` found at its version (from a server, in one request). */
  head(first: readonly RowLookup[]): Promise<{ head: PageHead; results: LookupResults }>;
  readonly rows: RowSource;
  readonly bounds: PageBounds;
}

const totalOf = (counts: PageCounts) => ({
  entities: Object.values(counts.entities).reduce((sum, count) => sum + count, 0),
  relations: Object.values(counts.relations).reduce((sum, count) => sum + count, 0),
});

/** The document server's stored rows (`POST …/rows`, the head with the first lookups), within bounds. */
export function serverPageRows(client: DocumentClient, docId: string): PageRows {
  return {
    async head(first) {
      const answer = await client.rows(docId, first, { issues: true });
      return {
        head: {
          version: answer.version,
          total: totalOf(answer.counts),
          counts: answer.counts,
          issues: answer.issues ?? [],
        },
        results: answer.results,
      };
    },
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
  for (const entityId of projection.entityIds()) {
    const kind = projection.stored(entityId)?.entityKind ?? "";
    counts.entities[kind] = (counts.entities[kind] ?? 0) + 1;
  }
  for (const relation of projection.relationsOfKind(undefined))
    counts.relations[relation.relationKind] = (counts.relations[relation.relationKind] ?? 0) + 1;
  const rows = replicaRowSource(projection, version);
  return {
    async head(first) {
      const { results } = await rows.lookUp(first);
      return { head: { version, total: totalOf(counts), counts, issues: [...issues] }, results };
    },
    rows,
    bounds: unbounded,
  };
}

/** The query reads more than the bounds: `message` says what; `entities` is the document's count. */
export class Unbounded extends Error {
  entities = 0;
}

/** A row read at another version than the page's first: the page is read again. */
export class VersionMoved extends Error {}

/** Looks rows up into a projection that holds only them, all at one version. */
export class RowReader {
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

  /** Holds the rows `results` found (a row held already is kept). */
  hold(results: LookupResults): void {
    for (const result of results)
      for (const row of result.rows)
        if (row.root === "entities") {
          if (this.projection.row(row.rowId) === undefined) this.projection.setRow(row.rowId, row.json);
        } else if (this.projection.relationJson(row.rowId) === undefined)
          this.projection.setRelationRow(row.rowId, row.json);
  }

  /** Asks the lookups (64 a request), holds the rows found; the answers' `found` and `last`. */
  async ask(lookups: readonly RowLookup[]) {
    const results = [];
    for (let start = 0; start < lookups.length; start += lookupsPerRequest) {
      const answer = await this.source.lookUp(lookups.slice(start, start + lookupsPerRequest));
      if (this.version !== undefined && answer.version !== this.version) throw new VersionMoved();
      this.version = answer.version;
      this.hold(answer.results);
      results.push(...answer.results);
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

  /** Holds the entities named, and the bases of the variants among them (those held already too). */
  async entities(ids: Iterable<string>): Promise<void> {
    const { projection } = this;
    const missingBases = (held: readonly string[]) =>
      held
        .map((id) => projection.stored(id)?.variantOf)
        .filter((base): base is string => base !== undefined && projection.stored(base) === undefined);
    const named = [...new Set(ids)];
    let wanted = [
      ...new Set([...named.filter((id) => projection.stored(id) === undefined), ...missingBases(named)]),
    ];
    for (let round = 0; wanted.length > 0 && round < 8; round++) {
      const lookups: RowLookup[] = [];
      for (let start = 0; start < wanted.length; start += idsPerLookup)
        lookups.push({
          members: "entity",
          ids: wanted.slice(start, start + idsPerLookup),
          limit: idsPerLookup,
        });
      await this.ask(lookups);
      wanted = [...new Set(missingBases(wanted))];
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
