/**
 * The one `snapshot` page function (ADR 0485): every page — plain, by kind, ids, relation kinds,
 * `related_to`, a time window, kinds with relations — reads rows from a row source (`PageRows`: the
 * document server's stored rows, `POST /documents/:id/rows`, or the tool's replica) into a projection
 * holding only them, and is cut by `fitPage`. A plain, kind or relation-kind page reads a window of
 * the members after its cursor (its counts are the kinds' counts, its cursor counts what came
 * before); any other page looks up every row its query can match, so it costs what its matches cost,
 * not the document. From the server, a query that would look up more than the bounds is `Unbounded`
 * (the caller asks the replica of a small document, without bounds, or refuses `read_limit`): no page
 * is ever cut silently.
 */
import type { RowLookup } from "../document/row-source.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { ownValue } from "../schema/own-keys.ts";
import {
  type LookupResults,
  membersPerPage,
  type PageHead,
  type PageRows,
  RowReader,
  Unbounded,
  VersionMoved,
} from "./page-rows.ts";
import {
  type Cursor,
  decodeCursor,
  fitPage,
  matchingEntityIds,
  ProjectionIndex,
  type SnapshotPage,
  type SnapshotQuery,
  snapshotPage,
} from "./snapshot-page.ts";

export { type PageRows, replicaPageRows, serverPageRows, Unbounded } from "./page-rows.ts";

/** Members of a window page's section read per page: more than any page's budget holds. */
const windowSize = 200;

/**
 * Whether a page's cursor counts the items before it: plain, kind (entities only), id and
 * relation-kind pages, whose window's counts come from the kinds' counts.
 */
function countedQuery(query: SnapshotQuery): boolean {
  if (query.related_to !== undefined || query.from_ms !== undefined || query.to_ms !== undefined)
    return false;
  // Kinds with relations list every relation touching any entity of those kinds: looked up.
  return !(query.kinds !== undefined && (query.include ?? "both") !== "entities");
}

export const narrowHint =
  'narrow the query: add `ids`, `kinds` with `include: "entities"`, `relation_kinds`, or a shorter time window';

/**
 * Reads the rows `query` can match, or a window of them, and answers its page over those rows.
 * Throws `Unbounded` when that is more than the bounds allow.
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
  const reader = new RowReader(schema, rows.rows, rows.bounds);
  const window = countedQuery(query) && query.ids === undefined ? windowOf(query) : undefined;
  // The version, totals and issues first (with a window's first members): every row read after must
  // be of this version.
  const { head, results } = await rows.head(window?.first ?? []);
  reader.version = head.version;
  reader.hold(results);
  try {
    return window === undefined
      ? await readMatches(reader, query, budget, head)
      : await readWindow(reader, window, results, query, budget, head);
  } catch (error) {
    if (error instanceof Unbounded) error.entities = head.total.entities;
    throw error;
  }
}

type MembersLookup = Extract<RowLookup, { members: string }>;

/** What a window page reads first: the entities after its cursor, or the relations when past them. */
function windowOf(query: SnapshotQuery) {
  const include = query.include ?? "both";
  const cursor: Cursor | undefined = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const inEntities = cursor === undefined || cursor.section === "e";
  const entities: MembersLookup | undefined =
    include !== "relations" && inEntities
      ? {
          members: "entity",
          ...(query.kinds === undefined ? {} : { kinds: query.kinds }),
          ...(cursor === undefined ? {} : { after: cursor.after }),
          limit: windowSize,
        }
      : undefined;
  const relations: MembersLookup | undefined =
    include !== "entities"
      ? {
          members: "relation",
          ...(query.relation_kinds === undefined ? {} : { kinds: query.relation_kinds }),
          ...(cursor?.section === "r" ? { after: cursor.after } : {}),
          limit: windowSize,
        }
      : undefined;
  const first = entities !== undefined ? [entities] : relations !== undefined ? [relations] : [];
  return { cursor, inEntities, entities, relations, first };
}

/**
 * The ids a window lookup found, in id order: those of `kinds` held after `after` and through `last`
 * (the rows found may hold others, and a variant's base is held beside its variant).
 */
function windowIds(
  ids: Iterable<string>,
  kindOf: (id: string) => string | undefined,
  lookup: MembersLookup,
  found: LookupResults[number],
): string[] {
  const kinds = lookup.kinds === undefined ? undefined : new Set(lookup.kinds);
  const after = lookup.after;
  const last = found.found < lookup.limit ? undefined : found.last;
  return [...ids]
    .filter((id) => {
      const kind = kindOf(id);
      return (
        kind !== undefined &&
        (kinds === undefined || kinds.has(kind)) &&
        (after === undefined || id > after) &&
        (last === undefined || id <= last)
      );
    })
    .sort();
}

/**
 * A plain, kind or relation-kind page: the members after the cursor, a window at a time, the entities
 * then (once they are through) the relations; what it matches from the kinds' counts, what came
 * before from the cursor's count.
 */
async function readWindow(
  reader: RowReader,
  window: ReturnType<typeof windowOf>,
  results: LookupResults,
  query: SnapshotQuery,
  budget: number,
  head: PageHead,
): Promise<SnapshotPage & { version: string }> {
  const { projection } = reader;
  const { cursor, inEntities } = window;
  let entityIds: string[] = [];
  let entitiesDone = true;
  if (window.entities !== undefined) {
    const found = results[0]!;
    entitiesDone = found.found < window.entities.limit;
    entityIds = windowIds(
      projection.entityIds(),
      (id) => projection.stored(id)?.entityKind,
      window.entities,
      found,
    );
    await reader.entities(entityIds);
  }
  let relationIds: string[] = [];
  if (window.relations !== undefined && entitiesDone) {
    const found = window.entities === undefined ? results[0]! : (await reader.ask([window.relations]))[0]!;
    relationIds = windowIds(
      projection.relationIds(),
      (id) => projection.storedRelation(id)?.relationKind,
      window.relations,
      found,
    );
  }
  const sum = (counts: Readonly<Record<string, number>>, kinds: readonly string[] | undefined) =>
    kinds === undefined
      ? Object.values(counts).reduce((total, count) => total + count, 0)
      : // Own counts only: a kind asked for named "constructor" counts 0, not Object's function.
        [...new Set(kinds)].reduce((total, kind) => total + (ownValue(counts, kind) ?? 0), 0);
  const matched = {
    entities: (query.include ?? "both") === "relations" ? 0 : sum(head.counts.entities, query.kinds),
    relations:
      (query.include ?? "both") === "entities" ? 0 : sum(head.counts.relations, query.relation_kinds),
  };
  const n = cursor?.n ?? 0;
  const page = fitPage(
    projection,
    {
      entityIds,
      entityStart: 0,
      relationIds,
      relationStart: 0,
      matched,
      before: { entities: inEntities ? n : matched.entities, relations: inEntities ? 0 : n },
      total: head.total,
      issues: head.issues,
      counted: { version: head.version, total: head.total },
    },
    query,
    budget,
  );
  return { ...page, version: reader.version ?? head.version, total: head.total };
}

/** A page over every row the query can match, looked up (named, related or timed entities; kinds). */
async function readMatches(
  reader: RowReader,
  query: SnapshotQuery,
  budget: number,
  head: PageHead,
): Promise<SnapshotPage & { version: string }> {
  const { scanned, endpointLookups } = reader.bounds;
  const projection = reader.projection;
  const include = query.include ?? "both";
  const listRelations = include !== "entities";
  const timed = query.from_ms !== undefined || query.to_ms !== undefined;
  const counted = (kinds: readonly string[], counts: Readonly<Record<string, number>>) =>
    [...new Set(kinds)].reduce((total, kind) => total + (ownValue(counts, kind) ?? 0), 0);

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

  // Id pages count their cursors, as window pages do.
  const countedPage = countedQuery(query) ? { version: head.version, total: head.total } : undefined;
  const page = snapshotPage(index, head.issues, query, budget, countedPage);
  return { ...page, version: reader.version ?? head.version, total: head.total };
}
