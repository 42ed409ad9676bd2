/** A session's relation reads: list (whole or by page, in the relations' order) and of. */

import { DocScriptError } from "../schema/docscript-error.ts";
import { keepFirst } from "./keep-first.ts";
import type { Projection } from "./projection.ts";
import { compareRelations, publicRelation, type StoredRelation } from "./row-shape.ts";
import { maxOrderedPage } from "./rows-on-demand.ts";
import { readLimit, type SessionContext } from "./session-context.ts";
import type { DocumentSession, OrderedEnd, RelationFilter } from "./session-types.ts";

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

/** A refused argument as a message shows it: its JSON, cut short (a hostile value may be huge). */
function shown(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = typeof value;
  }
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

const endsShape = `{ first: n } or { last: n }, n a whole number from 1 to ${maxOrderedPage}`;

/**
 * `relations.of` with `ends`: the first (last) n relations `entityId` holds of `relationKind`, in
 * order (position, then id), read from that end (`Projection.orderedRelations`: on a projection
 * reading rows on demand, the store's index of positions) and not from every relation it holds.
 */
function orderedEnd(projection: Projection, entityId: unknown, relationKind: unknown, ends: unknown) {
  const refuse = (what: string) => new DocScriptError("invalid_operation", `relations.of: ${what}`);
  if (typeof ends !== "object" || ends === null || Array.isArray(ends))
    throw refuse(`the third argument is ${endsShape}, not ${shown(ends)}`);
  const keys = Object.keys(ends);
  const from = keys.length === 1 ? keys[0] : undefined;
  if (from !== "first" && from !== "last")
    throw refuse(`the third argument is ${endsShape}; it has ${shown(keys)}`);
  const count = (ends as Record<string, unknown>)[from];
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > maxOrderedPage)
    throw refuse(`${from} is a whole number from 1 to ${maxOrderedPage}, not ${shown(count)}`);
  if (typeof entityId !== "string") throw refuse(`entityId is a string, not ${shown(entityId)}`);
  if (typeof relationKind !== "string")
    throw refuse(`with ${from}, name the relationKind (a string), not ${shown(relationKind)}`);
  const found = projection.orderedRelations(relationKind, entityId, from, count);
  if (from === "last") found.reverse();
  return found.map(publicRelation);
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
    of(entityId, relationKind, ends?: OrderedEnd) {
      if (ends !== undefined) return orderedEnd(projection, entityId, relationKind, ends);
      return projection.relationsOf(entityId, relationKind);
    },
  };
}
