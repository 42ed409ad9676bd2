/**
 * What a session's reads and writes share: the document, its projection (kept in step with each
 * write), and the one way a write lands (staged, checked within its reach, then applied to Loro).
 */

import { randomBytes } from "node:crypto";
import { type LoroDoc, LoroMap } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { changeScope, checkDocument, isDeferred, issueKey } from "./check-document.ts";
import { positionBetween } from "./fractional-position.ts";
import { projectDocument, refreshRows, versionKey } from "./interpret.ts";
import {
  EMBEDDED_ID,
  ENTITIES,
  RELATIONS,
  ROW_FIELDS,
  ROW_KIND,
  ROW_SLOTS,
  ROW_VARIANT_OF,
} from "./layout.ts";
import { type Projection, RowsNeeded } from "./projection.ts";
import type { StoredEntity, StoredRelation } from "./row-shape.ts";
import type { DocumentSessionOptions } from "./session-types.ts";
import { writeFields } from "./write-loro.ts";

/** A read refused for answering more than `atMost` items (a filter's `atMost`). */
export function readLimit(
  what: string,
  atMost: number,
  instead = "filter by kind, or read by id (entities.get) or by entity (relations.of)",
): DocScriptError {
  return new DocScriptError(
    "read_limit",
    `${what} matches more than ${atMost}; one read answers at most ${atMost}: ${instead}`,
  );
}

export type RowChanges = { entities: Map<string, unknown>; relations: Map<string, unknown> };

export type SessionContext = ReturnType<typeof createSessionContext>;

export function createSessionContext(doc: LoroDoc, schema: Schema, options: DocumentSessionOptions) {
  const given = options.projection;
  const projection: Projection =
    given !== undefined &&
    given.schema === schema &&
    given.readAt !== undefined &&
    given.readAt === versionKey(doc) &&
    doc.getPendingTxnLength() === 0
      ? given.overlay()
      : projectDocument(doc, schema);
  /** Changed only for the length of one call made through `asHost()`. */
  const state = { role: options.role ?? "script" };
  const createId =
    options.createId ?? ((kind: string) => `${kind}-${randomBytes(9).toString("base64url").slice(0, 12)}`);
  const entitiesMap = doc.getMap(ENTITIES);
  const relationsMap = doc.getMap(RELATIONS);

  const notFound = (entityId: string): DocScriptError =>
    new DocScriptError("entity_not_found", `no entity ${entityId}`, [
      { constraint: "entity.exists", message: "no such entity", entityId, path: [] },
    ]);
  const requireStored = (entityId: string): StoredEntity => {
    const stored = typeof entityId === "string" ? projection.stored(entityId) : undefined;
    if (stored === undefined) throw notFound(String(entityId));
    return stored;
  };
  const requireRelation = (relationId: string): StoredRelation => {
    const relation = projection.storedRelation(relationId);
    if (relation === undefined) {
      throw new DocScriptError("relation_not_found", `no relation ${relationId}`, [
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
  /** The fields map holding an entity's own fields: its row's, or its embedded row's in its holder's slot. */
  const fieldsMapOf = (stored: StoredEntity): LoroMap => {
    const row = rowMap(stored.rowId);
    if (stored.holder === undefined) return row.get(ROW_FIELDS) as LoroMap;
    const embedded = (row.get(ROW_SLOTS) as LoroMap).get(stored.holder.slot) as LoroMap;
    return embedded.get(ROW_FIELDS) as LoroMap;
  };
  const slotsOf = (rowId: string): LoroMap => rowMap(rowId).getOrCreateContainer(ROW_SLOTS, new LoroMap());

  /** The union of every landed write's scope (the after scope already holds the before scope). */
  const changed = {
    entityIds: new Set<string>(),
    relationIds: new Set<string>(),
    /**
     * Rows written by writes of fields alone: checked within those entities' reach when written; what
     * a whole change of them reaches (invariants read an entity's neighbours) is added at the end.
     */
    fieldRows: new Set<string>(),
  };

  /** The last position of each holder's ordered relations of a kind, while only appends changed them. */
  const lastPositions = new Map<string, string | undefined>();

  /**
   * Scope of a change: the rows' entities and relations, then everything touching them. A write of
   * entities' fields alone (`fieldsOf`: their rows change in those fields only) reaches no relation:
   * endpoints, slots and cardinality do not depend on a field's value; its scope is those entities,
   * their variants (which take the fields) and the entities of their identity.
   */
  const scopeOf = (changes: RowChanges, extraEntities: Iterable<string>, fieldsOf?: readonly string[]) => {
    if (fieldsOf === undefined)
      return changeScope(
        projection,
        { entities: changes.entities.keys(), relations: changes.relations.keys() },
        extraEntities,
      );
    const entityIds = new Set<string>(fieldsOf);
    for (const entityId of fieldsOf) {
      for (const variantId of projection.variantsOf(entityId)) entityIds.add(variantId);
      for (const claim of projection.claimsOf(entityId))
        for (const otherId of projection.sameIdentity(claim)) entityIds.add(otherId);
    }
    return { entityIds, relationIds: new Set<string>() };
  };

  /**
   * Lands one write: stage the rows it will produce in the projection, check what it touched, refuse
   * (undoing the staging) when it adds an issue, else mutate the document and re-read the rows.
   */
  const land = (
    changes: RowChanges,
    mutate: () => void,
    extraEntities: Iterable<string> = [],
    /**
     * The staged rows are exactly what `mutate` leaves (an update's fields, computed by the same ops):
     * they stay, and the rows are not read back out of the document. `fieldsOf`: the write changes
     * only these entities' fields, and is checked within their reach alone.
     */
    exact: false | { readonly fieldsOf: readonly string[] } = false,
  ): void => {
    const previous: RowChanges = { entities: new Map(), relations: new Map() };
    const fieldsOf = exact === false ? undefined : exact.fieldsOf;
    const beforeScope = scopeOf(changes, extraEntities, fieldsOf);
    // A projection reading rows on demand that lacks part of the scope: checking it now would check a
    // part and ask for the rest one level at a time; its reader fills the scope (with what its checks
    // ask next) and the write runs again (ADR 0466).
    if (projection.lacking) throw new RowsNeeded();
    const before = new Set(
      checkDocument(projection, { entityIds: beforeScope.entityIds, relationIds: beforeScope.relationIds })
        .filter((issue) => !isDeferred(issue))
        .map(issueKey),
    );
    for (const [rowId, json] of changes.entities) {
      previous.entities.set(rowId, projection.row(rowId) === undefined ? undefined : rowJson(rowId));
      projection.setRow(rowId, json);
    }
    for (const [relationId, json] of changes.relations) {
      const stored = relationsMap.get(relationId) as unknown;
      previous.relations.set(relationId, stored instanceof LoroMap ? stored.toJSON() : undefined);
      projection.setRelationRow(relationId, json);
    }
    // What the before scope held stays checked, without widening it to its neighbours' relations (a
    // clip's track holds thousands): that is the server's scope too, and it keeps a write's check local.
    const restore = () => {
      for (const [rowId, json] of previous.entities) projection.setRow(rowId, json);
      for (const [relationId, json] of previous.relations) projection.setRelationRow(relationId, json);
    };
    let afterScope: ReturnType<typeof scopeOf>;
    let added: DocumentIssue[];
    try {
      afterScope = scopeOf(changes, extraEntities, fieldsOf);
      for (const entityId of beforeScope.entityIds) afterScope.entityIds.add(entityId);
      for (const relationId of beforeScope.relationIds) afterScope.relationIds.add(relationId);
      added = checkDocument(projection, afterScope).filter(
        (issue) => !isDeferred(issue) && !before.has(issueKey(issue)),
      );
    } catch (error) {
      // A check that throws (an invariant's own bug, say) leaves nothing staged either.
      restore();
      throw error;
    }
    // A projection reading rows on demand that lacked some: the checks' answer may be wrong, so the
    // write does not land; the caller fills what was lacking and writes again (ADR 0466).
    const lacking = projection.lacking;
    if (added.length > 0 || lacking) {
      restore();
      if (lacking) throw new RowsNeeded();
      throw DocScriptError.fromIssues("schema_violation", added);
    }
    // The write lands whole or not at all: Loro has no rollback of a transaction, so the writes before
    // this one are committed first, and a mutation that throws part-way is reverted to that point.
    if (doc.getPendingTxnLength() > 0) doc.commit();
    const frontiers = doc.frontiers();
    try {
      mutate();
    } catch (error) {
      doc.commit();
      doc.revertTo(frontiers);
      doc.commit();
      restore();
      throw new DocScriptError(
        "invalid_operation",
        `the write could not be stored, and nothing of it landed: ${error instanceof Error ? error.message : String(error)}`.slice(
          0,
          500,
        ),
      );
    }
    if (exact === false)
      refreshRows(projection, doc, {
        entities: changes.entities.keys(),
        relations: changes.relations.keys(),
      });
    for (const rowId of changes.entities.keys()) projection.wrote(ENTITIES, rowId);
    for (const relationId of changes.relations.keys()) projection.wrote(RELATIONS, relationId);
    if (changes.relations.size > 0) lastPositions.clear();
    if (fieldsOf !== undefined) for (const rowId of changes.entities.keys()) changed.fieldRows.add(rowId);
    for (const entityId of afterScope.entityIds) changed.entityIds.add(entityId);
    for (const relationId of afterScope.relationIds) changed.relationIds.add(relationId);
  };

  const hostOnlyCheck = (
    stored: Pick<StoredEntity, "entityKind" | "entityId">,
    fieldNames: Iterable<string>,
  ): void => {
    if (state.role === "host") return;
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
  };

  /** The row JSON an embedded entity takes in its holder's slot, or a top-level row. */
  const embeddedJson = (stored: StoredEntity): Record<string, unknown> => ({
    [EMBEDDED_ID]: stored.entityId,
    [ROW_KIND]: stored.entityKind,
    [ROW_FIELDS]: stored.own,
  });
  const topLevelJson = (stored: StoredEntity): Record<string, unknown> => ({
    [ROW_KIND]: stored.entityKind,
    [ROW_FIELDS]: stored.own,
    ...(stored.variantOf === undefined ? {} : { [ROW_VARIANT_OF]: stored.variantOf }),
  });
  const withSlot = (rowId: string, slot: string, value: unknown): Record<string, unknown> => {
    const json = rowJson(rowId) ?? {};
    const slots = { ...((json[ROW_SLOTS] as Record<string, unknown> | undefined) ?? {}) };
    if (value === undefined) delete slots[slot];
    else slots[slot] = value;
    return { ...json, [ROW_SLOTS]: slots };
  };
  const writeTopLevelRow = (stored: StoredEntity): void => {
    const row = entitiesMap.setContainer(stored.entityId, new LoroMap());
    row.set(ROW_KIND, stored.entityKind);
    if (stored.variantOf !== undefined) row.set(ROW_VARIANT_OF, stored.variantOf);
    writeFields(
      row.setContainer(ROW_FIELDS, new LoroMap()),
      ownValue(schema.entities, stored.entityKind)?.fields ?? {},
      stored.own,
    );
  };
  const writeEmbeddedRow = (holderId: string, slot: string, stored: StoredEntity): void => {
    const embedded = slotsOf(holderId).setContainer(slot, new LoroMap());
    embedded.set(EMBEDDED_ID, stored.entityId);
    embedded.set(ROW_KIND, stored.entityKind);
    writeFields(
      embedded.setContainer(ROW_FIELDS, new LoroMap()),
      ownValue(schema.entities, stored.entityKind)?.fields ?? {},
      stored.own,
    );
  };

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

  return {
    doc,
    schema,
    projection,
    /** The role writes are checked for; `asHost()` changes it for the length of one call. */
    state,
    createId,
    entitiesMap,
    relationsMap,
    requireStored,
    requireRelation,
    rowJson,
    rowMap,
    fieldsMapOf,
    slotsOf,
    changed,
    land,
    hostOnlyCheck,
    embeddedJson,
    topLevelJson,
    withSlot,
    writeTopLevelRow,
    writeEmbeddedRow,
    orderedSiblings,
    positionAt,
    lastPosition,
    appendedLast,
  };
}
