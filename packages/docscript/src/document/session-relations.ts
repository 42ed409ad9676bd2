/** A session's relation reads and writes: list, of (`session-relation-reads.ts`), link, move, unlink. */

import { LoroMap } from "loro-crdt";
import type { RelationShape } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { isPlainRecord, ownValue } from "../schema/own-keys.ts";
import type { Relation } from "../schema/types.ts";
import { matchShape } from "./check-document.ts";
import {
  RELATION_ENDPOINT0,
  RELATION_ENDPOINT1,
  RELATION_KIND,
  RELATION_POSITION,
  ROW_SLOTS,
  slotRelationId,
} from "./layout.ts";
import type { Projection } from "./projection.ts";
import { publicRelation, type StoredEntity, type StoredRelation } from "./row-shape.ts";
import type { SessionContext } from "./session-context.ts";
import { sessionRelationReads } from "./session-relation-reads.ts";
import type { DocumentSession, LinkInput, MoveTarget } from "./session-types.ts";
import { storedCopy } from "./write-loro.ts";

/** A relation row holds strings only: Loro holds it as staged (`land`'s `exact`). */
const RELATION_ROW_EXACT = {};

/**
 * Whether a slot link's staged holder row is what Loro will hold (`land`'s `exact`): the holder's
 * slots are a map or absent, and an entity embedded into it has fields Loro holds as they are.
 */
function slotsExact(context: SessionContext, holderId: string, embedded?: StoredEntity): false | object {
  const slots = context.rowJson(holderId)?.[ROW_SLOTS];
  if (slots !== undefined && !isPlainRecord(slots)) return false;
  if (embedded === undefined) return {};
  const specs = ownValue(context.schema.entities, embedded.entityKind)?.fields;
  return specs !== undefined && storedCopy(specs, embedded.own) !== undefined && {};
}

/** A link of an ordered or unordered relation kind: a relation row of its own. */
function linkRow(
  context: SessionContext,
  input: LinkInput,
  from: StoredEntity,
  to: StoredEntity,
  shape: RelationShape,
): Relation {
  const { projection, createId, relationsMap, land, positionAround, lastPosition, appendedLast } = context;
  const relationId = createId(input.relationKind);
  const position = shape.ordered
    ? input.index === undefined
      ? lastPosition(input.relationKind, from.entityId)
      : positionAround(input.relationKind, from.entityId, input.index)
    : undefined;
  const json = {
    [RELATION_KIND]: input.relationKind,
    [RELATION_ENDPOINT0]: from.entityId,
    [RELATION_ENDPOINT1]: to.entityId,
    ...(position === undefined ? {} : { [RELATION_POSITION]: position }),
  };
  land(
    { entities: new Map(), relations: new Map([[relationId, json]]) },
    () => {
      const row = relationsMap.setContainer(relationId, new LoroMap());
      for (const [key, value] of Object.entries(json)) row.set(key, value);
    },
    [from.entityId, to.entityId],
    RELATION_ROW_EXACT,
  );
  if (shape.ordered && input.index === undefined && position !== undefined)
    appendedLast(input.relationKind, from.entityId, position);
  return publicRelation(projection.storedRelation(relationId) as StoredRelation);
}

/** A link into a slot of the holder's row: the target's id, or the target's row itself when it embeds. */
function linkSlot(
  context: SessionContext,
  from: StoredEntity,
  to: StoredEntity,
  slot: NonNullable<RelationShape["slot"]>,
): Relation {
  const { projection, entitiesMap, slotsOf, land, embeddedJson, withSlot, writeEmbeddedRow } = context;
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
    land(
      { entities, relations: new Map() },
      () => {
        writeEmbeddedRow(from.entityId, slot.name, to);
        entitiesMap.delete(to.entityId);
      },
      [to.entityId],
      slotsExact(context, from.entityId, to),
    );
  } else {
    land(
      {
        entities: new Map([[from.entityId, withSlot(from.entityId, slot.name, to.entityId)]]),
        relations: new Map(),
      },
      () => slotsOf(from.entityId).set(slot.name, to.entityId),
      [to.entityId],
      slotsExact(context, from.entityId),
    );
  }
  return publicRelation(
    projection.storedRelation(slotRelationId(from.entityId, slot.name)) as StoredRelation,
  );
}

function link(context: SessionContext, input: LinkInput): Relation {
  const { schema, requireStored } = context;
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
  if (shape.slot === undefined) return linkRow(context, input, from, to, shape);
  return linkSlot(context, from, to, shape.slot);
}

/** A slot's relation moves to another holder: unlinked, then linked there (or back, when that fails). */
function moveSlot(context: SessionContext, relation: StoredRelation, holderId: string): Relation {
  if (holderId === relation.endpoint0EntityId) return publicRelation(relation);
  const targetId = relation.endpoint1EntityId;
  const oldHolder = relation.endpoint0EntityId;
  unlink(context, relation.relationId);
  try {
    return link(context, {
      relationKind: relation.relationKind,
      endpoint0EntityId: holderId,
      endpoint1EntityId: targetId,
    });
  } catch (error) {
    link(context, {
      relationKind: relation.relationKind,
      endpoint0EntityId: oldHolder,
      endpoint1EntityId: targetId,
    });
    throw error;
  }
}

function move(context: SessionContext, relationId: string, target: MoveTarget): Relation {
  const { schema, projection, relationsMap, requireStored, requireRelation, land, positionAround } = context;
  const relation = requireRelation(relationId);
  const holderId = target.endpoint0EntityId ?? relation.endpoint0EntityId;
  if (relation.slot !== undefined) return moveSlot(context, relation, holderId);
  const holder = requireStored(holderId);
  const place = () => positionAround(relation.relationKind, holderId, target.index, relationId);
  // The new place is read before the target, when this holder's relations of the kind are ordered: on a
  // projection reading rows on demand both are then asked in one request, not one after the other. A
  // place read while rows were lacking never lands (the write throws `RowsNeeded` and runs again).
  const placed = ownValue(schema.relations, relation.relationKind)?.shapes.some(
    (candidate) => candidate.ordered === true && candidate.from.includes(holder.entityKind),
  )
    ? place()
    : undefined;
  const to = requireStored(relation.endpoint1EntityId);
  const shape = matchShape(schema, relation.relationKind, holder.entityKind, to.entityKind);
  const position = shape?.ordered ? (placed ?? place()) : undefined;
  const json = {
    [RELATION_KIND]: relation.relationKind,
    [RELATION_ENDPOINT0]: holderId,
    [RELATION_ENDPOINT1]: relation.endpoint1EntityId,
    ...(position === undefined ? {} : { [RELATION_POSITION]: position }),
  };
  land(
    { entities: new Map(), relations: new Map([[relationId, json]]) },
    () => {
      const row = relationsMap.get(relationId) as LoroMap;
      if (holderId !== relation.endpoint0EntityId) row.set(RELATION_ENDPOINT0, holderId);
      if (position !== undefined) row.set(RELATION_POSITION, position);
    },
    [holderId, relation.endpoint0EntityId],
    false,
    viewKept(projection, relation, holderId),
  );
  return publicRelation(projection.storedRelation(relationId) as StoredRelation);
}

/**
 * The entities whose view a move leaves as it was (ADR 0512): moved among its holder's others, a
 * relation changes only its position, which orders the relations of one kind and holder; its target
 * sees them in the same order when it is the end of no other of them (a clip in one track). Its
 * invariants then answer as before and are not asked again (a clip's reads its content: one request
 * less at 100,000 entities).
 */
function viewKept(projection: Projection, relation: StoredRelation, holderId: string): ReadonlySet<string> {
  const target = relation.endpoint1EntityId;
  if (holderId !== relation.endpoint0EntityId || target === holderId) return new Set();
  const others = projection
    .storedRelationsOf(target, relation.relationKind)
    .some((other) => other.relationId !== relation.relationId && other.endpoint0EntityId === holderId);
  return others ? new Set() : new Set([target]);
}

function unlink(context: SessionContext, relationId: string): void {
  const {
    projection,
    relationsMap,
    requireRelation,
    slotsOf,
    land,
    topLevelJson,
    withSlot,
    writeTopLevelRow,
  } = context;
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
}

export function sessionRelations(context: SessionContext): DocumentSession["relations"] {
  return {
    ...sessionRelationReads(context),
    link(input) {
      return link(context, input);
    },
    move(relationId, target) {
      return move(context, relationId, target);
    },
    unlink(relationId) {
      unlink(context, relationId);
    },
  };
}
