/**
 * A session's order keys: where a link or a move puts a relation among its holder's ordered targets of
 * a kind, and the holder's last key, kept while only appends write its relations.
 */

import { positionBetween } from "./fractional-position.ts";
import type { Projection } from "./projection.ts";
import type { StoredRelation } from "./row-shape.ts";

export function sessionOrder(projection: Projection) {
  /** The last position of each holder's ordered relations of a kind, while only appends changed them. */
  const lastPositions = new Map<string, string | undefined>();
  const orderedSiblings = (relationKind: string, holderId: string, excluding?: string): StoredRelation[] =>
    projection
      .storedRelationsOf(holderId, relationKind)
      .filter(
        (relation) =>
          relation.endpoint0EntityId === holderId &&
          relation.slot === undefined &&
          relation.relationId !== excluding,
      );
  /**
   * The place after the holder's last ordered target: one pass over its relations, no sort; then kept
   * (per holder and kind) while only appends at the end write its relations, so building a track of
   * thousands of clips does not pass over them once per clip. Any other relation write forgets it.
   */
  const lastPosition = (relationKind: string, holderId: string): string => {
    const key = `${relationKind}\u0000${holderId}`;
    if (lastPositions.has(key)) return positionBetween(lastPositions.get(key), undefined);
    let last: string | undefined;
    for (const relationId of projection.relationIdsOf(holderId)) {
      const relation = projection.storedRelation(relationId);
      if (
        relation === undefined ||
        relation.relationKind !== relationKind ||
        relation.endpoint0EntityId !== holderId ||
        relation.slot !== undefined ||
        relation.position === undefined
      )
        continue;
      if (last === undefined || relation.position > last) last = relation.position;
    }
    // Only an answer from every relation of the holder is kept (a projection reading on demand may lack some).
    if (!projection.lacking) lastPositions.set(key, last);
    return positionBetween(last, undefined);
  };
  /** After an append at the end has landed: its position is the holder's last. */
  const appendedLast = (relationKind: string, holderId: string, position: string): void => {
    lastPositions.set(`${relationKind}\u0000${holderId}`, position);
  };
  const positionAt = (siblings: StoredRelation[], index: number | undefined): string => {
    const at = index === undefined ? siblings.length : Math.max(0, Math.min(index, siblings.length));
    return positionBetween(siblings[at - 1]?.position, siblings[at]?.position);
  };
  /** A relation write other than an append at the end: the kept last keys may be stale. */
  const forgetLast = (): void => lastPositions.clear();
  return { orderedSiblings, lastPosition, appendedLast, positionAt, forgetLast };
}
