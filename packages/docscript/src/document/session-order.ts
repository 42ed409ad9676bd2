/**
 * A session's order keys: where a link or a move puts a relation among its holder's ordered targets of
 * a kind, and the holder's last key, kept while only appends write its relations. Each reads only the
 * relations around the place (`Projection.orderedRelations`: from the store's index of positions on
 * a projection reading rows on demand), not every relation of the holder (a track of thousands of clips).
 */

import { positionBetween } from "./fractional-position.ts";
import type { Projection } from "./projection.ts";

/** Up to this index a place is found from the holder's first relations; past it, from all of them. */
const nearFront = 500;

export function sessionOrder(projection: Projection) {
  /** The last position of each holder's ordered relations of a kind, while only appends changed them. */
  const lastPositions = new Map<string, string | undefined>();
  /**
   * The place after the holder's last ordered target: its last relation by position, kept (per holder
   * and kind) while only appends at the end write its relations, so building a track of thousands of
   * clips does not look it up once per clip. Any other relation write forgets it.
   */
  const lastPosition = (relationKind: string, holderId: string): string => {
    const key = `${relationKind}\u0000${holderId}`;
    if (lastPositions.has(key)) return positionBetween(lastPositions.get(key), undefined);
    const [lastRelation] = projection.orderedRelations(relationKind, holderId, "last", 1);
    const last = lastRelation?.position;
    // Only a whole answer is kept (a projection reading on demand may lack the rows yet).
    if (!projection.lacking) lastPositions.set(key, last);
    return positionBetween(last, undefined);
  };
  /** After an append at the end has landed: its position is the holder's last. */
  const appendedLast = (relationKind: string, holderId: string, position: string): void => {
    lastPositions.set(`${relationKind}\u0000${holderId}`, position);
  };
  /**
   * The key that puts a relation at `index` among the holder's ordered relations of a kind other than
   * `excluding` (the one a move moves), or after the last with no index; an index past the end is the
   * end.
   */
  const positionAround = (
    relationKind: string,
    holderId: string,
    index: number | undefined,
    excluding?: string,
  ): string => {
    const others = (from: "first" | "last", count: number) =>
      projection
        .orderedRelations(relationKind, holderId, from, excluding === undefined ? count : count + 1)
        .filter((relation) => relation.relationId !== excluding)
        .slice(0, count);
    if (index === undefined || !Number.isInteger(index) || index > nearFront) {
      if (index === undefined) return positionBetween(others("last", 1)[0]?.position, undefined);
      // Far from the front (or not a whole number): every relation of the holder, as before.
      const siblings = others("first", Number.POSITIVE_INFINITY);
      const at = Math.max(0, Math.min(index, siblings.length));
      return positionBetween(siblings[at - 1]?.position, siblings[at]?.position);
    }
    const at = Math.max(0, index);
    const first = others("first", at + 1);
    // Fewer than `at + 1`: the index is at or past the end.
    if (first.length <= at) return positionBetween(first.at(-1)?.position, undefined);
    return positionBetween(first[at - 1]?.position, first[at]?.position);
  };
  /** A relation write other than an append at the end: the kept last keys may be stale. */
  const forgetLast = (): void => lastPositions.clear();
  return { lastPosition, appendedLast, positionAround, forgetLast };
}
