/**
 * Compile: a session over a LoroDoc (a fork, in the tool) whose writes become document mutations.
 * Each write is checked before it lands and lands whole or not at all; `check()` is the whole-document
 * check a plan must pass. Reads return copies: changing them changes nothing.
 */
import { randomBytes } from "node:crypto";
import { type LoroDoc, LoroMap } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import { withDefaults } from "../schema/validate-payload.ts";
import {
  type CheckScope,
  changeScope,
  checkDocument,
  isDeferred,
  issueKey,
  matchShape,
} from "./check-document.ts";
import { positionBetween } from "./fractional-position.ts";
import { projectDocument, refreshRows, versionKey } from "./interpret.ts";
import {
  EMBEDDED_ID,
  ENTITIES,
  RELATION_ENDPOINT0,
  RELATION_ENDPOINT1,
  RELATION_KIND,
  RELATION_POSITION,
  RELATIONS,
  ROW_FIELDS,
  ROW_KIND,
  ROW_SLOTS,
  ROW_VARIANT_OF,
  slotRelationId,
} from "./layout.ts";
import { type Projection, publicRelation, type StoredEntity, type StoredRelation } from "./projection.ts";
import { applyOpToValue, checkOp, type UpdateOp } from "./update-op.ts";
import { applyOpToLoro, writeFields } from "./write-loro.ts";

export interface DocumentSessionOptions {
  /** `script` (default) may not write host-only fields; `host` may. */
  readonly role?: "script" | "host";
  /** Makes ids for new entities and relations; default `<kind>-<12 random characters>`. */
  readonly createId?: (kind: string) => string;
  /**
   * A projection read earlier (`projectDocument`) to start from instead of reading the document
   * again: the session works on a copy. Used only when it was read at the document's current
   * version; otherwise the document is read afresh.
   */
  readonly projection?: Projection;
}

export interface CreateEntityInput {
  readonly entityKind: string;
  readonly payload?: Readonly<Record<string, unknown>>;
  readonly entityId?: string;
  /** Makes the new entity a variant: it stores only what it overrides and reads with its base applied. */
  readonly variantOf?: string;
}

export interface LinkInput {
  readonly relationKind: string;
  readonly endpoint0EntityId: string;
  readonly endpoint1EntityId: string;
  /** Place among the holder's ordered targets of this kind; default last. */
  readonly index?: number;
}

export interface MoveTarget {
  /** A new holder. */
  readonly endpoint0EntityId?: string;
  /** A new place among the holder's ordered targets. */
  readonly index?: number;
}

export interface EntityFilter {
  readonly entityKind?: string;
}

export interface RelationFilter {
  readonly relationKind?: string;
  readonly entityId?: string;
}

export interface DocumentSession {
  readonly doc: LoroDoc;
  readonly schema: Schema;
  readonly entities: {
    list(filter?: EntityFilter): Entity[];
    get(entityId: string): Entity | undefined;
    /** Returns the entity already standing for the same identity, if the kind has one. */
    create(input: CreateEntityInput): Entity;
    update(entityId: string, ops: readonly UpdateOp[]): Entity;
    /** Removes the entity and every relation touching it; no other entity, except one embedded in its row. */
    delete(entityId: string): void;
  };
  readonly relations: {
    list(filter?: RelationFilter): Relation[];
    of(entityId: string, relationKind?: string): Relation[];
    link(input: LinkInput): Relation;
    move(relationId: string, target: MoveTarget): Relation;
    unlink(relationId: string): void;
  };
  /**
   * Every issue of the whole document, deferred constraints included; empty when it projects cleanly.
   * With `scope`, only the issues of those entities and relations (and the invariants over their kinds).
   */
  check(scope?: CheckScope): DocumentIssue[];
  /**
   * Everything the session's writes could have changed the issues of: the union of each landed write's
   * scope, before and after it. Outside it the document reads as it did when the session opened.
   */
  changedScope(): CheckScope;
  /**
   * The same session with the host's role: its writes may set host-only fields. It shares this
   * session's document, index and changed scope, so nothing is read again.
   */
  asHost(): DocumentSession;
  /** Throws `document_invalid` with the issues when `check()` finds any. */
  assertValid(): void;
}

type RowChanges = { entities: Map<string, unknown>; relations: Map<string, unknown> };

/** Opens a session over `doc`; the document is read once, then kept in step with each write. */
export function openDocument(
  doc: LoroDoc,
  schema: Schema,
  options: DocumentSessionOptions = {},
): DocumentSession {
  const given = options.projection;
  const projection: Projection =
    given !== undefined &&
    given.schema === schema &&
    given.readAt !== undefined &&
    given.readAt === versionKey(doc) &&
    doc.getPendingTxnLength() === 0
      ? given.clone()
      : projectDocument(doc, schema);
  /** Changed only for the length of one call made through `asHost()`. */
  let role = options.role ?? "script";
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
  const rowJson = (rowId: string): Record<string, unknown> | undefined => {
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
  const changed = { entityIds: new Set<string>(), relationIds: new Set<string>() };

  /** Scope of a change: the rows' entities and relations, then everything touching them. */
  const scopeOf = (changes: RowChanges, extraEntities: Iterable<string>) =>
    changeScope(
      projection,
      { entities: changes.entities.keys(), relations: changes.relations.keys() },
      extraEntities,
    );

  /**
   * Lands one write: stage the rows it will produce in the projection, check what it touched, refuse
   * (undoing the staging) when it adds an issue, else mutate the document and re-read the rows.
   */
  const land = (changes: RowChanges, mutate: () => void, extraEntities: Iterable<string> = []): void => {
    const previous: RowChanges = { entities: new Map(), relations: new Map() };
    const beforeScope = scopeOf(changes, extraEntities);
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
    const afterScope = scopeOf(changes, extraEntities);
    for (const entityId of beforeScope.entityIds) afterScope.entityIds.add(entityId);
    for (const relationId of beforeScope.relationIds) afterScope.relationIds.add(relationId);
    const added = checkDocument(projection, afterScope).filter(
      (issue) => !isDeferred(issue) && !before.has(issueKey(issue)),
    );
    if (added.length > 0) {
      for (const [rowId, json] of previous.entities) projection.setRow(rowId, json);
      for (const [relationId, json] of previous.relations) projection.setRelationRow(relationId, json);
      throw DocScriptError.fromIssues("schema_violation", added);
    }
    mutate();
    refreshRows(projection, doc, { entities: changes.entities.keys(), relations: changes.relations.keys() });
    for (const entityId of afterScope.entityIds) changed.entityIds.add(entityId);
    for (const relationId of afterScope.relationIds) changed.relationIds.add(relationId);
  };

  const hostOnlyCheck = (
    stored: Pick<StoredEntity, "entityKind" | "entityId">,
    fieldNames: Iterable<string>,
  ): void => {
    if (role === "host") return;
    const kind = schema.entities[stored.entityKind];
    for (const name of fieldNames) {
      if (kind?.fields[name]?.hostOnly) {
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
      schema.entities[stored.entityKind]?.fields ?? {},
      stored.own,
    );
  };
  const writeEmbeddedRow = (holderId: string, slot: string, stored: StoredEntity): void => {
    const embedded = slotsOf(holderId).setContainer(slot, new LoroMap());
    embedded.set(EMBEDDED_ID, stored.entityId);
    embedded.set(ROW_KIND, stored.entityKind);
    writeFields(
      embedded.setContainer(ROW_FIELDS, new LoroMap()),
      schema.entities[stored.entityKind]?.fields ?? {},
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
  const positionAt = (siblings: StoredRelation[], index: number | undefined): string => {
    const at = index === undefined ? siblings.length : Math.max(0, Math.min(index, siblings.length));
    return positionBetween(siblings[at - 1]?.position, siblings[at]?.position);
  };

  const session: DocumentSession = {
    doc,
    schema,
    entities: {
      list(filter = {}) {
        return [...projection.entities(filter.entityKind)].map((entity) => ({
          ...entity,
          payload: structuredClone(entity.payload),
        }));
      },
      get(entityId) {
        return projection.entity(entityId);
      },
      create(input) {
        const kind = schema.entities[input.entityKind];
        if (kind === undefined) {
          throw new DocScriptError(
            "unknown_kind",
            `"${input.entityKind}" is not an entity kind; kinds: ${Object.keys(schema.entities).join(", ")}`,
          );
        }
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
        const stored: StoredEntity = {
          entityId,
          entityKind: input.entityKind,
          own,
          rowId: entityId,
          ...(input.variantOf === undefined ? {} : { variantOf: input.variantOf }),
        };
        land(
          { entities: new Map([[entityId, topLevelJson(stored)]]), relations: new Map() },
          () => writeTopLevelRow(stored),
          [entityId],
        );
        return projection.entity(entityId) as Entity;
      },
      update(entityId, ops) {
        const stored = requireStored(entityId);
        const kind = schema.entities[stored.entityKind];
        if (kind === undefined)
          throw new DocScriptError("unknown_kind", `${entityId} has unknown kind "${stored.entityKind}"`);
        if (!Array.isArray(ops)) throw new DocScriptError("invalid_operation", "update takes a list of ops");
        const original = (projection.entity(entityId) as Entity).payload as Record<string, unknown>;
        let assembled = original;
        for (const op of ops) {
          checkOp(kind.fields, op, entityId);
          hostOnlyCheck(stored, [op.path[0] as string]);
          const field = kind.fields[op.path[0] as string];
          const current = assembled[op.path[0] as string];
          assembled = applyOpToValue(assembled, op, entityId);
          if (
            field?.fixed &&
            current !== null &&
            current !== undefined &&
            JSON.stringify(current) !== JSON.stringify(assembled[op.path[0] as string])
          ) {
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
        const touched = new Set(ops.map((op) => op.path[0] as string));
        const own: Record<string, unknown> = stored.variantOf === undefined ? assembled : { ...stored.own };
        if (stored.variantOf !== undefined) for (const name of touched) own[name] = assembled[name];
        const next: StoredEntity = { ...stored, own };
        const rowJsonAfter =
          stored.holder === undefined
            ? topLevelJson(next)
            : withSlot(stored.rowId, stored.holder.slot, embeddedJson(next));
        const fullRow =
          stored.holder === undefined ? { ...rowJson(stored.rowId), ...rowJsonAfter } : rowJsonAfter;
        land({ entities: new Map([[stored.rowId, fullRow]]), relations: new Map() }, () => {
          const fields = fieldsMapOf(stored);
          let progress = original;
          const baseOnly =
            stored.variantOf !== undefined
              ? new Set([...touched].filter((name) => !(name in stored.own)))
              : new Set<string>();
          // A variant's first write to a field copies the base's value in, then edits it.
          if (baseOnly.size > 0)
            writeFields(
              fields,
              kind.fields,
              Object.fromEntries([...baseOnly].map((name) => [name, progress[name]])),
            );
          for (const op of ops) {
            progress = applyOpToValue(progress, op, entityId);
            applyOpToLoro(fields, kind.fields, op, progress);
          }
        });
        return projection.entity(entityId) as Entity;
      },
      delete(entityId) {
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
      },
    },
    relations: {
      list(filter = {}) {
        if (filter.entityId !== undefined)
          return projection.relationsOf(filter.entityId, filter.relationKind);
        return [...projection.relationIds()]
          .map((relationId) => projection.storedRelation(relationId))
          .filter(
            (relation): relation is StoredRelation =>
              relation !== undefined &&
              (filter.relationKind === undefined || relation.relationKind === filter.relationKind),
          )
          .sort(
            (left, right) =>
              (left.relationKind < right.relationKind
                ? -1
                : left.relationKind > right.relationKind
                  ? 1
                  : 0) ||
              (left.endpoint0EntityId < right.endpoint0EntityId
                ? -1
                : left.endpoint0EntityId > right.endpoint0EntityId
                  ? 1
                  : 0) ||
              ((left.position ?? "") < (right.position ?? "")
                ? -1
                : (left.position ?? "") > (right.position ?? "")
                  ? 1
                  : 0) ||
              (left.relationId < right.relationId ? -1 : 1),
          )
          .map(publicRelation);
      },
      of(entityId, relationKind) {
        return projection.relationsOf(entityId, relationKind);
      },
      link(input) {
        if (schema.relations[input.relationKind] === undefined) {
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
            ? positionAt(orderedSiblings(input.relationKind, from.entityId), input.index)
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
          session.relations.unlink(relationId);
          try {
            return session.relations.link({
              relationKind: relation.relationKind,
              endpoint0EntityId: holderId,
              endpoint1EntityId: targetId,
            });
          } catch (error) {
            session.relations.link({
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
    },
    check(scope) {
      return checkDocument(projection, scope);
    },
    changedScope() {
      return { entityIds: new Set(changed.entityIds), relationIds: new Set(changed.relationIds) };
    },
    asHost() {
      const asHost = <Method extends (...args: never[]) => unknown>(method: Method): Method =>
        ((...args: Parameters<Method>) => {
          const previous = role;
          role = "host";
          try {
            return method(...args);
          } finally {
            role = previous;
          }
        }) as Method;
      const entities = session.entities;
      const relations = session.relations;
      const host: DocumentSession = {
        ...session,
        entities: {
          ...entities,
          create: asHost(entities.create),
          update: asHost(entities.update),
          delete: asHost(entities.delete),
        },
        relations: {
          ...relations,
          link: asHost(relations.link),
          move: asHost(relations.move),
          unlink: asHost(relations.unlink),
        },
        asHost: () => host,
      };
      return host;
    },
    assertValid() {
      const issues = checkDocument(projection);
      if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
    },
  };
  return session;
}
