/** A session's entity reads and writes: list, get (`session-entity-reads.ts`), create, update, delete. */

import { DocScriptError } from "../schema/docscript-error.ts";
import { isPlainRecord, ownValue } from "../schema/own-keys.ts";
import type { Entity } from "../schema/types.ts";
import { withDefaults } from "../schema/validate-payload.ts";
import { invariantsRead } from "./check-document.ts";
import { ROW_SLOTS } from "./layout.ts";
import { keepLoroHeadroom } from "./loro-memory.ts";
import { RowsNeeded } from "./projection.ts";
import type { RowRecord, StoredEntity } from "./row-shape.ts";
import type { SessionContext } from "./session-context.ts";
import { sessionEntityReads } from "./session-entity-reads.ts";
import type { CreateEntityInput, DocumentSession } from "./session-types.ts";
import { applyOpToValue, checkOp, type UpdateOp } from "./update-op.ts";
import { applyOpToLoro, storedCopy, writeFields } from "./write-loro.ts";

/** What an id a write names may look like: a plain name, so it is also a plain Loro map key. */
const entityIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;

function isEntityId(value: unknown): value is string {
  return typeof value === "string" && entityIdPattern.test(value);
}

/** An update's ops applied to the entity's payload, each op checked against its kind as it comes. */
function assembleUpdate(
  context: SessionContext,
  stored: StoredEntity,
  ops: readonly UpdateOp[],
): { original: Record<string, unknown>; assembled: Record<string, unknown> } {
  const { schema, projection, hostOnlyCheck } = context;
  const entityId = stored.entityId;
  const kind = ownValue(schema.entities, stored.entityKind);
  if (kind === undefined)
    throw new DocScriptError("unknown_kind", `${entityId} has unknown kind "${stored.entityKind}"`);
  if (!Array.isArray(ops)) throw new DocScriptError("invalid_operation", "update takes a list of ops");
  const original = (projection.entity(entityId) as Entity).payload as Record<string, unknown>;
  let assembled = original;
  // Copied once per update, then edited in place: an update's cost is linear in its ops.
  const fresh = new WeakSet<object>();
  for (const op of ops) {
    checkOp(kind.fields, op, entityId);
    hostOnlyCheck(stored, [op.path[0] as string]);
    const field = ownValue(kind.fields, op.path[0]);
    const current = assembled[op.path[0] as string];
    const stated =
      field?.fixed && current !== null && current !== undefined ? JSON.stringify(current) : undefined;
    assembled = applyOpToValue(assembled, op, entityId, fresh);
    if (stated !== undefined && stated !== JSON.stringify(assembled[op.path[0] as string])) {
      throw DocScriptError.fromIssues("schema_violation", [
        {
          constraint: "field.fixed",
          message: "is fixed once stated",
          entityId,
          path: [op.path[0] as string],
        },
      ]);
    }
  }
  return { original, assembled };
}

/**
 * What an update writes, checked against its kind but not landed: the row it leaves (read from
 * `rows` when an earlier update of the same call changed that row) and the Loro mutation.
 */
function prepareUpdate(
  context: SessionContext,
  entityId: string,
  ops: readonly UpdateOp[],
  rows: Map<string, unknown> | undefined,
): {
  rowId: string;
  row: unknown;
  write: () => void;
  readByInvariants: boolean;
  /** The entity as it was, and as the row will read after the write. */
  stored: StoredEntity;
  next: StoredEntity;
} {
  const { schema, requireStored, rowJson, fieldsMapOf, embeddedJson, topLevelJson, withSlot } = context;
  const stored = requireStored(entityId);
  const { original, assembled } = assembleUpdate(context, stored, ops);
  const specs = ownValue(schema.entities, stored.entityKind)?.fields ?? {};
  const touched = new Set(ops.map((op) => op.path[0] as string));
  const own: Record<string, unknown> = stored.variantOf === undefined ? assembled : { ...stored.own };
  if (stored.variantOf !== undefined) for (const name of touched) own[name] = assembled[name];
  const next: StoredEntity = { ...stored, own };
  const earlier = rows?.get(stored.rowId) as Record<string, unknown> | undefined;
  let row: unknown;
  if (stored.holder === undefined) row = { ...(earlier ?? rowJson(stored.rowId)), ...topLevelJson(next) };
  else if (earlier === undefined) row = withSlot(stored.rowId, stored.holder.slot, embeddedJson(next));
  else {
    const slots = { ...((earlier[ROW_SLOTS] as Record<string, unknown> | undefined) ?? {}) };
    slots[stored.holder.slot] = embeddedJson(next);
    row = { ...earlier, [ROW_SLOTS]: slots };
  }
  const write = () => {
    const fields = fieldsMapOf(stored);
    let progress = original;
    const baseOnly =
      stored.variantOf !== undefined
        ? new Set([...touched].filter((name) => !(name in stored.own)))
        : new Set<string>();
    // A variant's first write to a field copies the base's value in, then edits it.
    if (baseOnly.size > 0)
      writeFields(fields, specs, Object.fromEntries([...baseOnly].map((name) => [name, progress[name]])));
    // One op leaves the payload the update assembled: it is not applied again (a shift's 33,000).
    if (ops.length === 1) applyOpToLoro(fields, specs, ops[0] as UpdateOp, assembled);
    else {
      const written = new WeakSet<object>();
      for (const op of ops) {
        progress = applyOpToValue(progress, op, entityId, written);
        applyOpToLoro(fields, specs, op, progress);
      }
    }
    // Its handle's memory back now, not when the collector gets to it (`fieldsMapOf`).
    fields.free();
  };
  // Whether an invariant may read what this update writes (ADR 0483): then its row's full reach
  // (the neighbours whose invariants read it) is checked at the run's end.
  const readByInvariants = [...touched].some((name) => invariantsRead(schema, stored.entityKind, name));
  return { rowId: stored.rowId, row, write, readByInvariants, stored, next };
}

/**
 * The row the update leaves as `readRow` would read it (`read`, kept across a call's updates of one
 * row): the entity written in place of its stored self, the rest as held; undefined when the row is
 * to be read again: its stored self carried shape issues (the written row may lose them) or is not
 * among the row's entities.
 */
function rowAfter(
  projection: SessionContext["projection"],
  prepared: Pick<ReturnType<typeof prepareUpdate>, "rowId" | "stored" | "next">,
  read: Map<string, Omit<RowRecord, "json"> | undefined>,
): void {
  const { rowId, stored, next } = prepared;
  const before = read.has(rowId) ? read.get(rowId) : projection.row(rowId);
  const plain = (stored.shapeIssues?.length ?? 0) === 0 && before?.entities.includes(stored) === true;
  read.set(
    rowId,
    before !== undefined && plain
      ? {
          entities: before.entities.map((entity) => (entity === stored ? next : entity)),
          relations: before.relations,
        }
      : undefined,
  );
}

function createEntity(context: SessionContext, input: CreateEntityInput): Entity {
  const { schema, projection, createId, land, hostOnlyCheck, topLevelJson, writeTopLevelRow } = context;
  const kind = ownValue(schema.entities, input.entityKind);
  if (kind === undefined) {
    throw new DocScriptError(
      "unknown_kind",
      `"${input.entityKind}" is not an entity kind; kinds: ${Object.keys(schema.entities).join(", ")}`,
    );
  }
  if (input.entityId !== undefined && !isEntityId(input.entityId))
    throw new DocScriptError(
      "invalid_operation",
      `entityId must match ${entityIdPattern} (at most 200 characters), not ${JSON.stringify(String(input.entityId).slice(0, 60))}`,
    );
  if (input.variantOf !== undefined && typeof input.variantOf !== "string")
    throw new DocScriptError("invalid_operation", "variantOf is an entityId (a string)");
  if (input.payload !== undefined && !isPlainRecord(input.payload))
    throw new DocScriptError("invalid_operation", "payload is a record of fields");
  const given = input.payload ?? {};
  hostOnlyCheck(
    { entityKind: input.entityKind, entityId: input.entityId ?? input.entityKind },
    Object.keys(given),
  );
  const own = input.variantOf === undefined ? withDefaults(kind.fields, given) : { ...given };
  const identity = projection.identityOf({ entityKind: input.entityKind, own });
  const existing = identity === undefined ? undefined : projection.entityIdsWithIdentity(identity)[0];
  if (existing !== undefined) return projection.entity(existing) as Entity;
  const entityId = input.entityId ?? createId(input.entityKind);
  if (projection.stored(entityId) !== undefined) {
    throw new DocScriptError("invalid_operation", `an entity ${entityId} already exists`, [
      { constraint: "entity.unique", message: "the id is taken", entityId, path: [] },
    ]);
  }
  // Staged as Loro will hold it when it can be (most payloads): the row is then not read back.
  const copy = storedCopy(kind.fields, own);
  const stored: StoredEntity = {
    entityId,
    entityKind: input.entityKind,
    own: copy ?? own,
    rowId: entityId,
    ...(input.variantOf === undefined ? {} : { variantOf: input.variantOf }),
  };
  land(
    { entities: new Map([[entityId, topLevelJson(stored)]]), relations: new Map() },
    () => writeTopLevelRow(stored),
    [entityId],
    copy !== undefined && {},
  );
  return projection.entity(entityId) as Entity;
}

function updateMany(
  context: SessionContext,
  updates: readonly { readonly entityId: string; readonly ops: readonly UpdateOp[] }[],
): number {
  const { projection, land } = context;
  if (!Array.isArray(updates))
    throw new DocScriptError("invalid_operation", "updateMany takes a list of { entityId, ops }");
  const ids = new Set<string>();
  for (const update of updates) {
    if (!isPlainRecord(update) || typeof update.entityId !== "string")
      throw new DocScriptError("invalid_operation", "updateMany takes a list of { entityId, ops }");
    if (ids.has(update.entityId))
      throw new DocScriptError(
        "invalid_operation",
        `updateMany names ${update.entityId} twice: give each entity one update with all its ops`,
      );
    ids.add(update.entityId);
  }
  // Every entity is looked up before any is written: a projection reading rows on demand learns
  // all it lacks in one round (ADR 0466), and nothing lands on a partial answer.
  for (const entityId of ids) projection.stored(entityId);
  if (projection.lacking) throw new RowsNeeded();
  // One write: the rows of every update, checked together, landing whole or not at all.
  const rows = new Map<string, unknown>();
  const writes: (() => void)[] = [];
  const reached = new Set<string>();
  const read = new Map<string, Omit<RowRecord, "json"> | undefined>();
  for (const update of updates) {
    const prepared = prepareUpdate(context, update.entityId, update.ops, rows);
    rows.set(prepared.rowId, prepared.row);
    rowAfter(projection, prepared, read);
    writes.push(prepared.write);
    if (prepared.readByInvariants) reached.add(prepared.rowId);
  }
  if (writes.length > 0)
    land(
      { entities: rows, relations: new Map() },
      () => {
        // Loro's memory kept ahead of a large write, not grown a few pages at a time (ADR 0502).
        for (const write of writes) {
          keepLoroHeadroom();
          write();
        }
      },
      [],
      { fieldsOf: [...ids], reached, read },
    );
  return writes.length;
}

function deleteEntity(context: SessionContext, entityId: string): void {
  const { projection, entitiesMap, relationsMap, requireStored, slotsOf, land, withSlot } = context;
  const stored = requireStored(entityId);
  const entities = new Map<string, unknown>();
  const relations = new Map<string, unknown>();
  const slotClears: { holderId: string; slot: string }[] = [];
  if (stored.holder !== undefined) {
    entities.set(stored.rowId, withSlot(stored.rowId, stored.holder.slot, undefined));
  } else {
    entities.set(stored.rowId, undefined);
  }
  const goingIds =
    stored.holder === undefined
      ? (projection.row(stored.rowId)?.entities ?? []).map((entity) => entity.entityId)
      : [entityId];
  for (const relation of goingIds.flatMap((id) => projection.storedRelationsOf(id))) {
    if (relation.slot === undefined) relations.set(relation.relationId, undefined);
    else if (
      !goingIds.includes(relation.endpoint0EntityId) &&
      relation.endpoint0EntityId !== stored.holder?.entityId
    ) {
      slotClears.push({ holderId: relation.endpoint0EntityId, slot: relation.slot });
    }
  }
  for (const clear of slotClears) {
    const holder = projection.stored(clear.holderId);
    if (holder?.holder !== undefined || holder === undefined) continue;
    entities.set(clear.holderId, withSlot(clear.holderId, clear.slot, undefined));
  }
  land({ entities, relations }, () => {
    if (stored.holder !== undefined) slotsOf(stored.rowId).delete(stored.holder.slot);
    else entitiesMap.delete(stored.rowId);
    for (const relationId of relations.keys()) relationsMap.delete(relationId);
    for (const clear of slotClears)
      if (entities.has(clear.holderId)) slotsOf(clear.holderId).delete(clear.slot);
  });
}

export function sessionEntities(context: SessionContext): DocumentSession["entities"] {
  const { projection, land } = context;
  return {
    ...sessionEntityReads(context),
    create(input) {
      return createEntity(context, input);
    },
    update(entityId, ops) {
      // A write of one entity's fields: checked as `updateMany` checks each of its entities.
      const prepared = prepareUpdate(context, entityId, ops, undefined);
      const read = new Map<string, Omit<RowRecord, "json"> | undefined>();
      rowAfter(projection, prepared, read);
      land(
        { entities: new Map([[prepared.rowId, prepared.row]]), relations: new Map() },
        prepared.write,
        [],
        {
          fieldsOf: [entityId],
          reached: new Set(prepared.readByInvariants ? [prepared.rowId] : []),
          read,
        },
      );
      return projection.entity(entityId) as Entity;
    },
    updateMany(updates) {
      return updateMany(context, updates);
    },
    delete(entityId) {
      deleteEntity(context, entityId);
    },
  };
}
