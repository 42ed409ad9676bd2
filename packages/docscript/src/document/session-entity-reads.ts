/** A session's entity reads: list (whole, by page, or by a window on a number field) and get. */

import { DocScriptError } from "../schema/docscript-error.ts";
import { isPlainRecord, ownValue } from "../schema/own-keys.ts";
import type { Entity } from "../schema/types.ts";
import { readLimit, type SessionContext } from "./session-context.ts";
import type { DocumentSession, FieldRange } from "./session-types.ts";

/** Ids read per step of a range listing. */
const rangeChunk = 5_000;

const copy = (entity: Entity): Entity => ({ ...entity, payload: structuredClone(entity.payload) });

const tooMany = (entityKind: string | undefined, atMost: number) =>
  readLimit(
    `entities.list(${entityKind === undefined ? "" : JSON.stringify(entityKind)})`,
    atMost,
    `read it in pages (entities.list({ entityKind, limit: ${atMost}, after: <the last entityId of the previous page> })), or read by id (entities.get)`,
  );

function checkLimit(limit: number | undefined): void {
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1))
    throw new DocScriptError(
      "invalid_operation",
      `entities.list: limit is a whole number of at least 1, not ${JSON.stringify(limit)}`,
    );
}

/** Refuses a range no number field of the kind answers. */
function checkRange(context: SessionContext, entityKind: string | undefined, range: FieldRange): void {
  const { schema } = context;
  if (entityKind === undefined || ownValue(schema.entities, entityKind) === undefined)
    throw new DocScriptError("invalid_operation", "entities.list: a range needs an entityKind");
  const field = ownValue(schema.entities[entityKind]?.fields, range.field);
  if (!isPlainRecord(range) || field === undefined || field.type !== "number")
    throw new DocScriptError(
      "invalid_operation",
      `entities.list: range.field names a number field of ${entityKind}, not ${JSON.stringify(range.field)}`,
    );
  for (const bound of [range.from, range.to])
    if (bound !== undefined && typeof bound !== "number")
      throw new DocScriptError("invalid_operation", "entities.list: range.from and range.to are numbers");
}

/**
 * Entities of a kind whose number field lies in `range`, in entityId order: the candidates' ids are
 * read in chunks (the kind's listing, or on a projection reading rows on demand the store's window
 * index), each entity's field checked as it comes, until a page is full. `after` reads on after the
 * last entity of the previous page.
 */
function inRange(
  context: SessionContext,
  pageEnds: Map<string, string>,
  entityKind: string | undefined,
  range: FieldRange,
  limit: number | undefined,
  after: string | undefined,
  atMost: number | undefined,
): Entity[] {
  const { projection } = context;
  checkRange(context, entityKind, range);
  checkLimit(limit);
  const from = range.from ?? Number.NEGATIVE_INFINITY;
  const to = range.to ?? Number.POSITIVE_INFINITY;
  const wanted = limit ?? (atMost === undefined ? Number.POSITIVE_INFINITY : atMost + 1);
  const found: Entity[] = [];
  // A page of `limit` reads a first chunk of that many candidates: a script paging by 1,000 has the store
  // read 1,000 a page, not 5,000 from each cursor. Candidates the run moved out of the window are read
  // past in doubling chunks, so a page takes a few rounds, not one a chunk.
  let chunk = Math.min(rangeChunk, wanted);
  let cursor = after;
  for (;;) {
    const ids = projection.entityIdsInWindow(entityKind as string, range, cursor, chunk);
    for (const entityId of ids) {
      const entity = projection.entity(entityId);
      const value = entity?.payload[range.field];
      if (entity !== undefined && typeof value === "number" && value >= from && value < to) {
        found.push(copy(entity));
        if (found.length >= wanted) break;
      }
    }
    if (found.length >= wanted || ids.length < chunk || projection.lacking) break;
    cursor = ids.at(-1);
    chunk = Math.min(rangeChunk, chunk * 2);
  }
  if (limit === undefined && atMost !== undefined && found.length > atMost) throw tooMany(entityKind, atMost);
  const last = found.at(-1);
  if (limit !== undefined && last !== undefined) pageEnds.set(last.entityId, last.entityKind);
  return found;
}

export function sessionEntityReads(
  context: SessionContext,
): Pick<DocumentSession["entities"], "list" | "get"> {
  const { projection } = context;
  /** The last entity of each page answered: `after` naming it reads on, even once it is deleted. */
  const pageEnds = new Map<string, string>();
  return {
    list(filter = {}) {
      const { entityKind, limit, after, atMost, range } = filter;
      if (range !== undefined) return inRange(context, pageEnds, entityKind, range, limit, after, atMost);
      // One more than `atMost` tells a read that would answer more from one that answers exactly that.
      const most = atMost === undefined ? Number.POSITIVE_INFINITY : atMost + 1;
      if (limit === undefined && after === undefined) {
        const found = projection.entitiesListed(entityKind, most);
        if (atMost !== undefined && found.length > atMost) throw tooMany(entityKind, atMost);
        return found.map(copy);
      }
      // A page: in entityId order, which no write changes (a write moves the entity it touched in the
      // document's order, so a walk in that order would skip or repeat what a script writes as it goes).
      checkLimit(limit);
      if (after !== undefined) {
        const kind = pageEnds.get(after) ?? projection.stored(after)?.entityKind;
        if (kind === undefined || (entityKind !== undefined && kind !== entityKind))
          throw new DocScriptError(
            "invalid_operation",
            `entities.list: after names no ${entityKind ?? "entity"} "${after}"; pass the entityId of the last entity of the previous page`,
          );
      }
      const ids = projection.entityIdsAfter(entityKind, after, limit ?? most);
      if (limit === undefined && atMost !== undefined && ids.length > atMost)
        throw tooMany(entityKind, atMost);
      const page = ids.flatMap((entityId) => projection.entity(entityId) ?? []);
      const last = page.at(-1);
      if (limit !== undefined && last !== undefined) pageEnds.set(last.entityId, last.entityKind);
      return page;
    },
    get(entityId) {
      return projection.entity(entityId);
    },
  };
}
