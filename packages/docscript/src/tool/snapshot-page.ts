/**
 * One `snapshot` page: the entities, then the relations, a query matches, in id order, as many as fit the
 * page's token budget, with a cursor to the rest. Reads a projection: the tool's replica's, or one
 * holding only the rows a filtered query can match (`rows-snapshot-page.ts`); filters by kind, id,
 * relation and, for timelines, time.
 */
import type { Projection } from "../document/projection.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import { fitPrefix, tokensOf } from "./budget.ts";
import { elide } from "./plan-preview.ts";

export interface SnapshotQuery {
  readonly cursor?: string | undefined;
  readonly kinds?: readonly string[] | undefined;
  readonly ids?: readonly string[] | undefined;
  readonly related_to?: string | undefined;
  readonly relation_kinds?: readonly string[] | undefined;
  readonly include?: "entities" | "relations" | "both" | undefined;
  readonly fields?: readonly string[] | undefined;
  readonly from_ms?: number | undefined;
  readonly to_ms?: number | undefined;
}

export interface SnapshotPage {
  /** Whole-document counts. */
  readonly total: { readonly entities: number; readonly relations: number };
  /** What the query matches, over all pages. */
  readonly matched: { readonly entities: number; readonly relations: number };
  readonly entities: readonly unknown[];
  readonly relations: readonly Relation[];
  /** Matches after this page; with `next_cursor`, send the same query again with it. */
  readonly remaining: { readonly entities: number; readonly relations: number };
  readonly next_cursor?: string;
  /** Present when the document does not project cleanly; at most 10 listed. */
  readonly issues?: readonly DocumentIssue[];
  readonly issue_count?: number;
  /** Values shortened on this page (long strings and lists): read them whole from a script. */
  readonly elided?: number;
}

/** Candidates considered per page before the token fit: far more than any budget holds. */
const pageCandidates = 400;

/** Sorted id lists of a projection, rebuilt only after it changed. */
export class ProjectionIndex {
  private entityIds: string[] | undefined;
  private relationIds: string[] | undefined;

  readonly projection: Projection;

  constructor(projection: Projection) {
    this.projection = projection;
  }

  /** Forget the sorted lists (the projection's rows changed). */
  changed(): void {
    this.entityIds = undefined;
    this.relationIds = undefined;
  }

  sortedEntityIds(): readonly string[] {
    this.entityIds ??= [...this.projection.entityIds()].sort();
    return this.entityIds;
  }

  sortedRelationIds(): readonly string[] {
    this.relationIds ??= [...this.projection.relationIds()].sort();
    return this.relationIds;
  }
}

export interface Cursor {
  readonly section: "e" | "r";
  readonly after: string;
  /** Items of the section before `after` (pages read from the server count them instead of the ids). */
  readonly n?: number;
}

export class CursorError extends Error {}

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

export function decodeCursor(text: string): Cursor {
  try {
    const value = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Cursor;
    if (
      (value.section === "e" || value.section === "r") &&
      typeof value.after === "string" &&
      (value.n === undefined || (Number.isInteger(value.n) && value.n >= 0))
    )
      return value;
  } catch {}
  throw new CursorError("cursor is not one a snapshot page returned; start again without it");
}

/** First index in a sorted list greater than `after`. */
function firstAfter(sorted: readonly string[], after: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (sorted[middle]! <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** A timeline entity's span in ms: a sequence marker's own, a clip's by its marker. */
function spanOf(projection: Projection, entity: Entity): [number, number] | undefined {
  let marker: Entity | undefined = entity;
  if (entity.entityKind !== "sequence-marker") {
    const relation = projection.relationsOf(entity.entityId, "marker")[0];
    marker = relation === undefined ? undefined : projection.entity(relation.endpoint1EntityId);
  }
  if (marker === undefined || marker.entityKind !== "sequence-marker") return undefined;
  const start = marker.payload.startMs;
  if (typeof start !== "number") return undefined;
  const duration = marker.payload.durationMs;
  return [start, start + (typeof duration === "number" ? duration : 0)];
}

/** An entity as a page shows it: only `fields` when given; long values elided past a quarter of the page. */
export function renderEntity(
  entity: Entity,
  fields: readonly string[] | undefined,
  budget: number,
): { value: unknown; elided: boolean } {
  const payload =
    fields === undefined
      ? entity.payload
      : Object.fromEntries(
          fields.filter((name) => name in entity.payload).map((name) => [name, entity.payload[name]]),
        );
  const whole = {
    entityId: entity.entityId,
    entityKind: entity.entityKind,
    ...(entity.variantOf === undefined ? {} : { variantOf: entity.variantOf }),
    payload,
  };
  // One entity never takes more than a quarter of a page: long values read as their head and a count.
  if (JSON.stringify(payload).length < budget && tokensOf(whole) <= budget / 4)
    return { value: whole, elided: false };
  return { value: { ...whole, payload: elide(payload) }, elided: true };
}

/** Whether `query` filters entities (otherwise every entity matches). */
function filtersEntities(query: SnapshotQuery): boolean {
  return (
    query.kinds !== undefined ||
    query.ids !== undefined ||
    query.related_to !== undefined ||
    query.from_ms !== undefined ||
    query.to_ms !== undefined
  );
}

/** The ids of the entities `query` matches, in id order. */
export function matchingEntityIds(index: ProjectionIndex, query: SnapshotQuery): readonly string[] {
  const projection = index.projection;
  const kinds = query.kinds === undefined ? undefined : new Set(query.kinds);
  const relationKinds = query.relation_kinds === undefined ? undefined : new Set(query.relation_kinds);
  const related =
    query.related_to === undefined
      ? undefined
      : new Set(
          projection
            .relationsOf(query.related_to)
            .filter((relation) => relationKinds === undefined || relationKinds.has(relation.relationKind))
            .flatMap((relation) => [relation.endpoint0EntityId, relation.endpoint1EntityId])
            .filter((id) => id !== query.related_to),
        );
  const from = query.from_ms ?? Number.NEGATIVE_INFINITY;
  const to = query.to_ms ?? Number.POSITIVE_INFINITY;
  const timed = query.from_ms !== undefined || query.to_ms !== undefined;

  // Cheap checks first (the stored kind, no payload assembled); the time window reads the clip's marker.
  const entityMatches = (entityId: string): boolean => {
    if (related !== undefined && !related.has(entityId)) return false;
    const stored = projection.stored(entityId);
    if (stored === undefined) return false;
    if (kinds !== undefined && !kinds.has(stored.entityKind)) return false;
    if (timed) {
      const entity = projection.entity(entityId);
      const span = entity === undefined ? undefined : spanOf(projection, entity);
      if (span === undefined || span[0] > to || span[1] < from) return false;
    }
    return true;
  };
  // Entity ids to walk, in order: the listed ids or the related ones when given (few), else every id.
  const entityIds =
    query.ids !== undefined
      ? [...new Set(query.ids)].sort()
      : related !== undefined
        ? [...related].sort()
        : index.sortedEntityIds();
  return filtersEntities(query) ? entityIds.filter(entityMatches) : entityIds;
}

/**
 * A page read as a window of what the query matches (plain, kind, id and relation-kind pages): its
 * cursors count the items before them (`n`), and what it measures against the budget carries the
 * document's version and totals.
 */
export interface Counted {
  readonly version: string;
  readonly total: { readonly entities: number; readonly relations: number };
}

/** What one page is cut from: the matches from the cursor on, in id order, and how many in all. */
export interface PageSections {
  /** Matched entities in id order, listed from `entityStart` (an id not held is passed over). */
  readonly entityIds: readonly string[];
  readonly entityStart: number;
  /** Matched relations in id order, listed from `relationStart`. */
  readonly relationIds: readonly string[];
  readonly relationStart: number;
  /** What the query matches over all pages, and how many of each came before this page's first. */
  readonly matched: { readonly entities: number; readonly relations: number };
  readonly before: { readonly entities: number; readonly relations: number };
  readonly total: { readonly entities: number; readonly relations: number };
  readonly issues: readonly DocumentIssue[];
  readonly counted?: Counted | undefined;
}

/** A relation as a page lists it. */
function listedRelation(projection: Projection, relationId: string): Relation | undefined {
  const relation = projection.storedRelation(relationId);
  return relation === undefined
    ? undefined
    : {
        relationId: relation.relationId,
        relationKind: relation.relationKind,
        endpoint0EntityId: relation.endpoint0EntityId,
        endpoint1EntityId: relation.endpoint1EntityId,
      };
}

/**
 * The one way a page is cut (every `snapshot` page ends here): the entities, then the relations, from
 * the cursor on, as many as fit `budget`, with what remains and a cursor to it.
 */
export function fitPage(
  projection: Projection,
  sections: PageSections,
  query: Pick<SnapshotQuery, "cursor" | "fields">,
  budget: number,
): SnapshotPage {
  const { entityIds, relationIds, matched, before, issues, counted } = sections;
  const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  type Item =
    | { section: "e"; id: string; value: unknown; elided: boolean }
    | { section: "r"; id: string; value: Relation; elided: false };
  const candidates: Item[] = [];
  for (
    let position = sections.entityStart;
    position < entityIds.length && candidates.length < pageCandidates;
    position++
  ) {
    const id = entityIds[position]!;
    const entity = projection.entity(id);
    if (entity !== undefined)
      candidates.push({ section: "e", id, ...renderEntity(entity, query.fields, budget) });
  }
  for (
    let position = sections.relationStart;
    position < relationIds.length && candidates.length < pageCandidates;
    position++
  ) {
    const id = relationIds[position]!;
    const relation = listedRelation(projection, id);
    if (relation !== undefined) candidates.push({ section: "r", id, value: relation, elided: false });
  }
  const shownIssues = issues.slice(0, 10);
  const build = (items: readonly Item[]) => {
    const entities = items.filter((item) => item.section === "e").map((item) => item.value);
    const relations = items.filter((item) => item.section === "r").map((item) => item.value as Relation);
    const shown = { e: entities.length, r: relations.length };
    const remainingEntities = Math.max(0, matched.entities - before.entities - entities.length);
    const remainingRelations = Math.max(0, matched.relations - before.relations - relations.length);
    const last = items.at(-1);
    const next: Cursor | undefined =
      last !== undefined
        ? counted === undefined
          ? { section: last.section, after: last.id }
          : {
              section: last.section,
              after: last.id,
              n: (last.section === "e" ? before.entities : before.relations) + shown[last.section],
            }
        : counted === undefined
          ? { section: cursor?.section ?? "e", after: cursor?.after ?? "" }
          : (cursor ?? { section: "e", after: "", n: 0 });
    const elided = items.filter((item) => item.elided).length;
    const more = remainingEntities + remainingRelations > 0;
    return {
      ...(counted === undefined ? {} : { version: counted.version }),
      total: sections.total,
      matched,
      entities,
      relations,
      remaining: { entities: remainingEntities, relations: remainingRelations },
      ...(more ? { next_cursor: encodeCursor(next) } : {}),
      ...(issues.length === 0 ? {} : { issues: shownIssues, issue_count: issues.length }),
      ...(elided === 0 ? {} : { elided }),
    } satisfies SnapshotPage;
  };
  return fitPrefix(candidates, budget, build).answer;
}

/** The page of `query` over a projection holding every row it can match (the replica's, or looked up). */
export function snapshotPage(
  index: ProjectionIndex,
  issues: readonly DocumentIssue[],
  query: SnapshotQuery,
  budget: number,
  counted?: Counted,
): SnapshotPage {
  const projection = index.projection;
  const include = query.include ?? "both";
  const entityFiltered = filtersEntities(query);
  const relationKinds = query.relation_kinds === undefined ? undefined : new Set(query.relation_kinds);
  const listEntities = include !== "relations";
  const sortedEntities: readonly string[] =
    listEntities || entityFiltered ? matchingEntityIds(index, query) : [];
  const matchedEntityIds = entityFiltered ? new Set(sortedEntities) : undefined;
  const relationMatches = (relationId: string): boolean => {
    const relation = projection.storedRelation(relationId);
    if (relation === undefined) return false;
    if (relationKinds !== undefined && !relationKinds.has(relation.relationKind)) return false;
    if (query.related_to !== undefined)
      return (
        relation.endpoint0EntityId === query.related_to || relation.endpoint1EntityId === query.related_to
      );
    return (
      matchedEntityIds === undefined ||
      matchedEntityIds.has(relation.endpoint0EntityId) ||
      matchedEntityIds.has(relation.endpoint1EntityId)
    );
  };
  const relationIds =
    query.related_to !== undefined
      ? [...projection.relationIdsOf(query.related_to)].sort()
      : matchedEntityIds !== undefined
        ? [...new Set([...matchedEntityIds].flatMap((id) => [...projection.relationIdsOf(id)]))].sort()
        : index.sortedRelationIds();
  const listRelations = include !== "entities";
  const relationsUnfiltered =
    matchedEntityIds === undefined && relationKinds === undefined && query.related_to === undefined;
  const matchedRelationIds: readonly string[] = !listRelations
    ? []
    : relationsUnfiltered
      ? relationIds
      : relationIds.filter(relationMatches);
  const shownEntities = listEntities ? sortedEntities : [];

  const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const entityStart =
    cursor === undefined
      ? 0
      : cursor.section === "e"
        ? firstAfter(shownEntities, cursor.after)
        : shownEntities.length;
  const relationStart =
    cursor === undefined || cursor.section === "e" ? 0 : firstAfter(matchedRelationIds, cursor.after);
  return fitPage(
    projection,
    {
      entityIds: shownEntities,
      entityStart,
      relationIds: matchedRelationIds,
      relationStart,
      matched: { entities: shownEntities.length, relations: matchedRelationIds.length },
      before: { entities: entityStart, relations: relationStart },
      total: counted?.total ?? {
        entities: projection.entityCount,
        relations: index.sortedRelationIds().length,
      },
      issues,
      counted,
    },
    query,
    budget,
  );
}
