/** A session's relation reads and writes: list, of, link, move, unlink. */

import { LoroMap } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import { ownValue } from "../schema/own-keys.ts";
import { matchShape } from "./check-document.ts";
import { keepFirst } from "./keep-first.ts";
import {
  RELATION_ENDPOINT0,
  RELATION_ENDPOINT1,
  RELATION_KIND,
  RELATION_POSITION,
  slotRelationId,
} from "./layout.ts";
import { compareRelations, publicRelation, type StoredEntity, type StoredRelation } from "./row-shape.ts";
import { readLimit, type SessionContext } from "./session-context.ts";
import type { DocumentSession, RelationFilter } from "./session-types.ts";

export function sessionRelations(context: SessionContext): DocumentSession["relations"] {
  const {
    schema,
    projection,
    createId,
    entitiesMap,
    relationsMap,
    requireStored,
    requireRelation,
    slotsOf,
    land,
    embeddedJson,
    topLevelJson,
    withSlot,
    writeTopLevelRow,
    writeEmbeddedRow,
    orderedSiblings,
    positionAt,
    lastPosition,
    appendedLast,
  } = context;
  /** The last relation of each page answered, as it stood then: `after` naming it reads on from there. */
  const pageEnds = new Map<string, StoredRelation>();
  const matches = (relation: StoredRelation, filter: RelationFilter) =>
    (filter.relationKind === undefined || relation.relationKind === filter.relationKind) &&
    (filter.entityId === undefined ||
      relation.endpoint0EntityId === filter.entityId ||
      relation.endpoint1EntityId === filter.entityId);
  /** Where a page starts: the relation `after` names, as the page that ended on it answered it, or as it stands. */
  const pageStart = (filter: RelationFilter, after: string): StoredRelation => {
    for (const known of [pageEnds.get(after), projection.storedRelation(after)])
      if (known !== undefined && matches(known, filter)) return known;
    throw new DocScriptError(
      "invalid_operation",
      `relations.list: after names no ${filter.relationKind === undefined ? "" : `${filter.relationKind} `}relation "${after}"${filter.entityId === undefined ? "" : ` touching "${filter.entityId}"`}; pass the relationId of the last relation of the previous page`,
    );
  };
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
  const answer = (page: StoredRelation[], limit: number | undefined) => {
    const last = page.at(-1);
    if (limit !== undefined && last !== undefined) pageEnds.set(last.relationId, last);
    return page.map(publicRelation);
  };
  const relations: DocumentSession["relations"] = {
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
        let start = 0;
        if (from !== undefined) {
          // The first relation past `from` in the order `all` is sorted in.
          for (let high = all.length; start < high; ) {
            const middle = (start + high) >>> 1;
            if (compareRelations(all[middle] as StoredRelation, from) > 0) high = middle;
            else start = middle + 1;
          }
        }
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
    link(input) {
      if (ownValue(schema.relations, input.relationKind) === undefined) {
        throw new DocScriptError(
          "unknown_kind",
          `"${input.relationKind}" is not a relation kind; kinds: ${Object.keys(schema.relations).join(", ")}`,
        );
      }
      const from = requireStored(input.endpoint0EntityId);
      const to = requireStored(input.endpoint1EntityId);
      const shape = matchShape(schema, input.relationKind, from.entityKind, to.entityKind);
      if (shape === undefined) {
        throw DocScriptError.fromIssues("schema_violation", [
          {
            constraint: "relation.endpoint-kind",
            message: `"${input.relationKind}" does not link a ${from.entityKind} to a ${to.entityKind}`,
            entityId: from.entityId,
            path: [],
          },
        ]);
      }
      if (shape.slot === undefined) {
        const relationId = createId(input.relationKind);
        const position = shape.ordered
          ? input.index === undefined
            ? lastPosition(input.relationKind, from.entityId)
            : positionAt(orderedSiblings(input.relationKind, from.entityId), input.index)
          : undefined;
        const json = {
          [RELATION_KIND]: input.relationKind,
          [RELATION_ENDPOINT0]: from.entityId,
          [RELATION_ENDPOINT1]: to.entityId,
          ...(position === undefined ? {} : { [RELATION_POSITION]: position }),
        };
        land({ entities: new Map(), relations: new Map([[relationId, json]]) }, () => {
          const row = relationsMap.setContainer(relationId, new LoroMap());
          for (const [key, value] of Object.entries(json)) row.set(key, value);
        }, [from.entityId, to.entityId]);
        if (shape.ordered && input.index === undefined && position !== undefined)
          appendedLast(input.relationKind, from.entityId, position);
        return publicRelation(projection.storedRelation(relationId) as StoredRelation);
      }
      const slot = shape.slot;
      if (from.holder !== undefined)
        throw new DocScriptError("invalid_operation", `${from.entityId} is embedded and holds no slots`);
      const occupied = projection.storedRelation(slotRelationId(from.entityId, slot.name));
      if (occupied !== undefined) {
        throw DocScriptError.fromIssues("schema_violation", [
          {
            constraint: "relation.cardinality",
            message: `${from.entityId} already holds ${occupied.endpoint1EntityId} in its "${slot.name}" slot; unlink it first`,
            entityId: from.entityId,
            relationId: occupied.relationId,
            path: [],
          },
        ]);
      }
      if (slot.embed) {
        if (to.holder !== undefined) {
          throw DocScriptError.fromIssues("schema_violation", [
            {
              constraint: "relation.cardinality",
              message: `${to.entityId} is held by ${to.holder.entityId}; move or unlink that relation first`,
              entityId: to.entityId,
              path: [],
            },
          ]);
        }
        const entities = new Map<string, unknown>([
          [to.entityId, undefined],
          [from.entityId, withSlot(from.entityId, slot.name, embeddedJson(to))],
        ]);
        land({ entities, relations: new Map() }, () => {
          writeEmbeddedRow(from.entityId, slot.name, to);
          entitiesMap.delete(to.entityId);
        }, [to.entityId]);
      } else {
        land(
          {
            entities: new Map([[from.entityId, withSlot(from.entityId, slot.name, to.entityId)]]),
            relations: new Map(),
          },
          () => slotsOf(from.entityId).set(slot.name, to.entityId),
          [to.entityId],
        );
      }
      return publicRelation(
        projection.storedRelation(slotRelationId(from.entityId, slot.name)) as StoredRelation,
      );
    },
    move(relationId, target) {
      const relation = requireRelation(relationId);
      const holderId = target.endpoint0EntityId ?? relation.endpoint0EntityId;
      if (relation.slot !== undefined) {
        if (holderId === relation.endpoint0EntityId) return publicRelation(relation);
        const targetId = relation.endpoint1EntityId;
        const oldHolder = relation.endpoint0EntityId;
        relations.unlink(relationId);
        try {
          return relations.link({
            relationKind: relation.relationKind,
            endpoint0EntityId: holderId,
            endpoint1EntityId: targetId,
          });
        } catch (error) {
          relations.link({
            relationKind: relation.relationKind,
            endpoint0EntityId: oldHolder,
            endpoint1EntityId: targetId,
          });
          throw error;
        }
      }
      const holder = requireStored(holderId);
      const to = requireStored(relation.endpoint1EntityId);
      const shape = matchShape(schema, relation.relationKind, holder.entityKind, to.entityKind);
      const position = shape?.ordered
        ? positionAt(orderedSiblings(relation.relationKind, holderId, relationId), target.index)
        : undefined;
      const json = {
        [RELATION_KIND]: relation.relationKind,
        [RELATION_ENDPOINT0]: holderId,
        [RELATION_ENDPOINT1]: relation.endpoint1EntityId,
        ...(position === undefined ? {} : { [RELATION_POSITION]: position }),
      };
      land({ entities: new Map(), relations: new Map([[relationId, json]]) }, () => {
        const row = relationsMap.get(relationId) as LoroMap;
        if (holderId !== relation.endpoint0EntityId) row.set(RELATION_ENDPOINT0, holderId);
        if (position !== undefined) row.set(RELATION_POSITION, position);
      }, [holderId, relation.endpoint0EntityId]);
      return publicRelation(projection.storedRelation(relationId) as StoredRelation);
    },
    unlink(relationId) {
      const relation = requireRelation(relationId);
      if (relation.slot === undefined) {
        land(
          { entities: new Map(), relations: new Map([[relationId, undefined]]) },
          () => relationsMap.delete(relationId),
          [relation.endpoint0EntityId, relation.endpoint1EntityId],
        );
        return;
      }
      const holderId = relation.endpoint0EntityId;
      const slot = relation.slot;
      const embedded = projection
        .claimsOf(relation.endpoint1EntityId)
        .find((claim) => claim.holder?.entityId === holderId);
      if (embedded === undefined) {
        land(
          { entities: new Map([[holderId, withSlot(holderId, slot, undefined)]]), relations: new Map() },
          () => slotsOf(holderId).delete(slot),
          [relation.endpoint1EntityId],
        );
        return;
      }
      // An embedded entity leaves its holder's row and stands alone until it is linked again.
      const alone: StoredEntity = {
        entityId: embedded.entityId,
        entityKind: embedded.entityKind,
        own: embedded.own,
        rowId: embedded.entityId,
      };
      const entities = new Map<string, unknown>([
        [holderId, withSlot(holderId, slot, undefined)],
        [embedded.entityId, topLevelJson(alone)],
      ]);
      land({ entities, relations: new Map() }, () => {
        slotsOf(holderId).delete(slot);
        writeTopLevelRow(alone);
      }, [embedded.entityId]);
    },
  };
  return relations;
}
