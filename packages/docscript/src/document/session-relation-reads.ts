/** A session's relation reads: list (whole or by page, in the relations' order) and of. */

import { DocScriptError } from "../schema/docscript-error.ts";
import { keepFirst } from "./keep-first.ts";
import { compareRelations, publicRelation, type StoredRelation } from "./row-shape.ts";
import { readLimit, type SessionContext } from "./session-context.ts";
import type { DocumentSession, RelationFilter } from "./session-types.ts";

const matches = (relation: StoredRelation, filter: RelationFilter) =>
  (filter.relationKind === undefined || relation.relationKind === filter.relationKind) &&
  (filter.entityId === undefined ||
    relation.endpoint0EntityId === filter.entityId ||
    relation.endpoint1EntityId === filter.entityId);

const tooMany = (filter: RelationFilter, atMost: number) => {
  const shown = {
    ...(filter.relationKind === undefined ? {} : { relationKind: filter.relationKind }),
    ...(filter.entityId === undefined ? {} : { entityId: filter.entityId }),
  };
  const page = `limit: ${atMost}, after: <the relationId of the last relation of the previous page>`;
  return readLimit(
    `relations.list(${Object.keys(shown).length === 0 ? "" : JSON.stringify(shown)})`,
    atMost,
    filter.entityId === undefined
      ? `read it in pages (relations.list({ relationKind, ${page} })), or read by entity (relations.of)`
      : `read it in pages (relations.list({ entityId, relationKind, ${page} }); relations.of reads no pages)`,
  );
};

/** The index of the first of `all` (sorted by `compareRelations`) past `from`. */
function firstPast(all: readonly StoredRelation[], from: StoredRelation): number {
  let start = 0;
  for (let high = all.length; start < high; ) {
    const middle = (start + high) >>> 1;
    if (compareRelations(all[middle] as StoredRelation, from) > 0) high = middle;
    else start = middle + 1;
  }
  return start;
}

export function sessionRelationReads(
  context: SessionContext,
): Pick<DocumentSession["relations"], "list" | "of"> {
  const { projection } = context;
  /** The last relation of each page answered, as it stood then: `after` naming it reads on from there. */
  const pageEnds = new Map<string, StoredRelation>();
  /** Where a page starts: the relation `after` names, as the page that ended on it answered it, or as it stands. */
  const pageStart = (filter: RelationFilter, after: string): StoredRelation => {
    for (const known of [pageEnds.get(after), projection.storedRelation(after)])
      if (known !== undefined && matches(known, filter)) return known;
    throw new DocScriptError(
      "invalid_operation",
      `relations.list: after names no ${filter.relationKind === undefined ? "" : `${filter.relationKind} `}relation "${after}"${filter.entityId === undefined ? "" : ` touching "${filter.entityId}"`}; pass the relationId of the last relation of the previous page`,
    );
  };
  const answer = (page: StoredRelation[], limit: number | undefined) => {
    const last = page.at(-1);
    if (limit !== undefined && last !== undefined) pageEnds.set(last.relationId, last);
    return page.map(publicRelation);
  };
  return {
    list(filter = {}) {
      const { limit, atMost } = filter;
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1))
        throw new DocScriptError(
          "invalid_operation",
          `relations.list: limit is a whole number of at least 1, not ${JSON.stringify(limit)}`,
        );
      const from = filter.after === undefined ? undefined : pageStart(filter, filter.after);
      if (filter.entityId !== undefined) {
        const all = projection.storedRelationsOf(filter.entityId, filter.relationKind);
        const start = from === undefined ? 0 : firstPast(all, from);
        if (limit === undefined && atMost !== undefined && all.length - start > atMost)
          throw tooMany(filter, atMost);
        return answer(all.slice(start, limit === undefined ? undefined : start + limit), limit);
      }
      const matching: StoredRelation[] = [];
      for (const relation of projection.relationsOfKind(filter.relationKind)) {
        if (from !== undefined && compareRelations(relation, from) <= 0) continue;
        if (limit === undefined && atMost !== undefined && matching.length >= atMost)
          throw tooMany(filter, atMost);
        matching.push(relation);
      }
      if (limit !== undefined) keepFirst(matching, limit, compareRelations);
      return answer(matching.sort(compareRelations), limit);
    },
    of(entityId, relationKind) {
      return projection.relationsOf(entityId, relationKind);
    },
  };
}
