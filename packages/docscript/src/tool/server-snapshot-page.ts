/**
 * A `snapshot` page read from the document server's stored rows (`GET …/entities`, `…/relations`), so a
 * page costs the same at 1k and 1M entities and the tool reads nothing of the document itself. Serves
 * the queries the stored rows index: no filter, kinds (entities only), ids, relation kinds; a
 * `related_to`, time-window or kinds-with-relations query looks up the rows it can match instead
 * (`rows-snapshot-page.ts`).
 */
import type { DocumentClient } from "../client/create-document-client.ts";
import type { Relation } from "../schema/types.ts";
import type { EntityPage, PageCounts } from "../server/document-host.ts";
import { fitPrefix } from "./budget.ts";
import {
  type Cursor,
  decodeCursor,
  encodeCursor,
  renderEntity,
  type SnapshotPage,
  type SnapshotQuery,
} from "./snapshot-page.ts";

/** Entities or relations asked of the server per page: more than any page's budget holds. */
const fetched = 200;

/** Whether the stored rows' pages answer `query` (otherwise the rows it can match are looked up). */
export function servedByServer(query: SnapshotQuery): boolean {
  if (query.related_to !== undefined || query.from_ms !== undefined || query.to_ms !== undefined)
    return false;
  const include = query.include ?? "both";
  // Kinds with relations list every relation touching any entity of those kinds: looked up.
  return !(query.kinds !== undefined && include !== "entities");
}

const sum = (counts: Readonly<Record<string, number>>, kinds: readonly string[] | undefined): number =>
  kinds === undefined
    ? Object.values(counts).reduce((total, count) => total + count, 0)
    : [...new Set(kinds)].reduce((total, kind) => total + (counts[kind] ?? 0), 0);

export async function serverSnapshotPage(
  client: DocumentClient,
  docId: string,
  query: SnapshotQuery,
  budget: number,
): Promise<SnapshotPage & { version: string }> {
  const include = query.include ?? "both";
  const cursor: Cursor | undefined = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const ids = query.ids === undefined ? undefined : [...new Set(query.ids)].sort();
  const listEntities = include !== "relations";
  const listRelations = include !== "entities";
  const inEntities = cursor === undefined || cursor.section === "e";
  const before = cursor?.n ?? 0;

  // Entities: a page from the cursor (ids: all of them, at most 200, so the match count is exact).
  const entityPage: EntityPage = await client.entities(docId, {
    kinds: query.kinds,
    ids,
    ...(inEntities && cursor !== undefined ? { after: cursor.after } : {}),
    limit: listEntities && inEntities ? (ids === undefined ? fetched : ids.length) : 0,
  });
  const counts: PageCounts = entityPage.counts;
  const matchedEntities = !listEntities
    ? 0
    : ids !== undefined
      ? entityPage.entities.length + (inEntities ? before : 0)
      : sum(counts.entities, query.kinds);
  const entityItems = entityPage.entities.map((entity) => ({
    section: "e" as const,
    id: entity.entityId,
    ...renderEntity(entity, query.fields, budget),
  }));

  // Relations, once the entities are through on this fetch: of the listed entities, or all (by kind).
  let relations: Relation[] = [];
  let matchedRelations = 0;
  const relationKinds = query.relation_kinds === undefined ? undefined : new Set(query.relation_kinds);
  if (listRelations) {
    if (ids !== undefined) {
      const touching = new Map<string, Relation>();
      for (const id of ids) {
        const page = await client.relations(docId, { endpoint: id, limit: 1000 });
        for (const relation of page.relations)
          if (relationKinds === undefined || relationKinds.has(relation.relationKind))
            touching.set(relation.relationId, relation);
      }
      const all = [...touching.values()].sort((left, right) => (left.relationId < right.relationId ? -1 : 1));
      matchedRelations = all.length;
      const after = cursor?.section === "r" ? cursor.after : undefined;
      relations = all
        .filter((relation) => after === undefined || relation.relationId > after)
        .slice(0, fetched);
    } else {
      matchedRelations = sum(counts.relations, query.relation_kinds);
      const entitiesDone = !listEntities || entityPage.entities.length < fetched;
      if (entitiesDone) {
        const page = await client.relations(docId, {
          kinds: query.relation_kinds,
          ...(cursor?.section === "r" ? { after: cursor.after } : {}),
          limit: fetched,
        });
        relations = page.relations;
      }
    }
  }
  const relationItems = relations.map((relation) => ({
    section: "r" as const,
    id: relation.relationId,
    value: relation,
    elided: false,
  }));
  type Item = (typeof entityItems)[number] | (typeof relationItems)[number];
  const candidates: Item[] = [...entityItems, ...relationItems];
  const entitiesBefore = inEntities ? before : matchedEntities;
  const relationsBefore = inEntities ? 0 : before;
  const issues = entityPage.issues;

  const build = (items: readonly Item[]) => {
    const entities = items.filter((item) => item.section === "e").map((item) => item.value);
    const shownRelations = items.filter((item) => item.section === "r").map((item) => item.value as Relation);
    const remainingEntities = Math.max(0, matchedEntities - entitiesBefore - entities.length);
    const remainingRelations = listRelations
      ? Math.max(0, matchedRelations - relationsBefore - shownRelations.length)
      : 0;
    const last = items.at(-1);
    const more = remainingEntities + remainingRelations > 0;
    const next: Cursor =
      last === undefined
        ? (cursor ?? { section: "e", after: "", n: 0 })
        : last.section === "e"
          ? { section: "e", after: last.id, n: entitiesBefore + entities.length }
          : { section: "r", after: last.id, n: relationsBefore + shownRelations.length };
    const elided = items.filter((item) => item.elided).length;
    return {
      version: entityPage.version,
      total: entityPage.total,
      matched: { entities: matchedEntities, relations: listRelations ? matchedRelations : 0 },
      entities,
      relations: shownRelations,
      remaining: { entities: remainingEntities, relations: remainingRelations },
      ...(more ? { next_cursor: encodeCursor(next) } : {}),
      ...(issues.length === 0 ? {} : { issues: issues.slice(0, 10), issue_count: issues.length }),
      ...(elided === 0 ? {} : { elided }),
    };
  };
  return fitPrefix(candidates, budget, build).answer;
}
