/**
 * A session's rows: finding an entity's or relation's stored row (in the projection, kept in step with
 * every write), the row JSON a write stages, and the Loro containers a write fills.
 */

import { type LoroDoc, LoroMap } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { ownValue } from "../schema/own-keys.ts";
import {
  EMBEDDED_ID,
  ENTITIES,
  RELATIONS,
  ROW_FIELDS,
  ROW_KIND,
  ROW_SLOTS,
  ROW_VARIANT_OF,
} from "./layout.ts";
import type { Projection } from "./projection.ts";
import type { StoredEntity, StoredRelation } from "./row-shape.ts";
import { writeFields } from "./write-loro.ts";

/** The row JSON an embedded entity takes in its holder's slot. */
export function embeddedJson(stored: StoredEntity): Record<string, unknown> {
  return { [EMBEDDED_ID]: stored.entityId, [ROW_KIND]: stored.entityKind, [ROW_FIELDS]: stored.own };
}

/** The row JSON of a top-level entity. */
export function topLevelJson(stored: StoredEntity): Record<string, unknown> {
  return {
    [ROW_KIND]: stored.entityKind,
    [ROW_FIELDS]: stored.own,
    ...(stored.variantOf === undefined ? {} : { [ROW_VARIANT_OF]: stored.variantOf }),
  };
}

/** Refuses a script's write of a host-only field (`role` is the writer's). */
export function checkHostOnly(
  schema: Schema,
  role: "script" | "host",
  stored: Pick<StoredEntity, "entityKind" | "entityId">,
  fieldNames: Iterable<string>,
): void {
  if (role === "host") return;
  const kind = ownValue(schema.entities, stored.entityKind);
  for (const name of fieldNames) {
    if (ownValue(kind?.fields, name)?.hostOnly) {
      throw new DocScriptError(
        "host_only_field",
        `${stored.entityId} ${name}: only the host writes this field`,
        [
          {
            constraint: "field.hostOnly",
            message: "only the host writes this field",
            entityId: stored.entityId,
            path: [name],
          },
        ],
      );
    }
  }
}

/** Reading a session's rows: required lookups with typed errors, row JSON, and a row's containers. */
export function sessionRowReads(doc: LoroDoc, projection: Projection) {
  const entitiesMap = doc.getMap(ENTITIES);
  const relationsMap = doc.getMap(RELATIONS);
  const requireStored = (entityId: string): StoredEntity => {
    const stored = typeof entityId === "string" ? projection.stored(entityId) : undefined;
    if (stored === undefined) {
      throw DocScriptError.notFound("entity", String(entityId), `no entity ${String(entityId)}`, [
        { constraint: "entity.exists", message: "no such entity", entityId: String(entityId), path: [] },
      ]);
    }
    return stored;
  };
  const requireRelation = (relationId: string): StoredRelation => {
    const relation = projection.storedRelation(relationId);
    if (relation === undefined) {
      throw DocScriptError.notFound("relation", relationId, `no relation ${relationId}`, [
        { constraint: "relation.exists", message: "no such relation", relationId, path: [] },
      ]);
    }
    return relation;
  };
  /**
   * A row's JSON: the projection's, kept in step with the document by every write (reading it out of
   * Loro costs a decode per row, the most of a bulk write), else the document's.
   */
  const rowJson = (rowId: string): Record<string, unknown> | undefined => {
    const held = projection.rowJson(rowId);
    if (held !== undefined) return held as Record<string, unknown>;
    const value = entitiesMap.get(rowId) as unknown;
    return value instanceof LoroMap ? (value.toJSON() as Record<string, unknown>) : undefined;
  };
  const rowMap = (rowId: string): LoroMap => entitiesMap.get(rowId) as LoroMap;
  /**
   * The fields map holding an entity's own fields: its row's, or its embedded row's in its holder's
   * slot. The maps on the way are freed at once: each handle Loro hands out holds memory in its module
   * until the garbage collector finalizes it (a shift of 33,000 markers made ~100,000 of them).
   */
  const fieldsMapOf = (stored: StoredEntity): LoroMap => {
    const row = rowMap(stored.rowId);
    if (stored.holder === undefined) {
      const fields = row.get(ROW_FIELDS) as LoroMap;
      row.free();
      return fields;
    }
    const slots = row.get(ROW_SLOTS) as LoroMap;
    const embedded = slots.get(stored.holder.slot) as LoroMap;
    const fields = embedded.get(ROW_FIELDS) as LoroMap;
    row.free();
    slots.free();
    embedded.free();
    return fields;
  };
  const slotsOf = (rowId: string): LoroMap => rowMap(rowId).getOrCreateContainer(ROW_SLOTS, new LoroMap());
  /** The row JSON of `rowId` with its slot `slot` set to `value` (or cleared, for undefined). */
  const withSlot = (rowId: string, slot: string, value: unknown): Record<string, unknown> => {
    const json = rowJson(rowId) ?? {};
    const slots = { ...((json[ROW_SLOTS] as Record<string, unknown> | undefined) ?? {}) };
    if (value === undefined) delete slots[slot];
    else slots[slot] = value;
    return { ...json, [ROW_SLOTS]: slots };
  };
  return {
    entitiesMap,
    relationsMap,
    requireStored,
    requireRelation,
    rowJson,
    rowMap,
    fieldsMapOf,
    slotsOf,
    withSlot,
  };
}

/** Writing an entity's row into Loro: a top-level row, or an embedded one in its holder's slot. */
export function sessionRowWrites(schema: Schema, rows: ReturnType<typeof sessionRowReads>) {
  const writeTopLevelRow = (stored: StoredEntity): void => {
    const row = rows.entitiesMap.setContainer(stored.entityId, new LoroMap());
    row.set(ROW_KIND, stored.entityKind);
    if (stored.variantOf !== undefined) row.set(ROW_VARIANT_OF, stored.variantOf);
    writeFields(
      row.setContainer(ROW_FIELDS, new LoroMap()),
      ownValue(schema.entities, stored.entityKind)?.fields ?? {},
      stored.own,
    );
  };
  const writeEmbeddedRow = (holderId: string, slot: string, stored: StoredEntity): void => {
    const embedded = rows.slotsOf(holderId).setContainer(slot, new LoroMap());
    embedded.set(EMBEDDED_ID, stored.entityId);
    embedded.set(ROW_KIND, stored.entityKind);
    writeFields(
      embedded.setContainer(ROW_FIELDS, new LoroMap()),
      ownValue(schema.entities, stored.entityKind)?.fields ?? {},
      stored.own,
    );
  };
  return { writeTopLevelRow, writeEmbeddedRow };
}
