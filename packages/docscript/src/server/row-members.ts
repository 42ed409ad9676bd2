/**
 * What a stored row projects to, for the store's projection: the row's JSON with the entities and
 * relations it holds (an embedded entity and a slot relation live in their holder's row), and the
 * entities a page shows, assembled from found rows.
 */
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import { identityKey, type RowRecord, readRelationRow, readRow } from "../document/row-shape.ts";
import type { Schema } from "../schema/define-schema.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { Entity, Relation } from "../schema/types.ts";
import type { FoundMember, RowChange, RowMember, RowRoot } from "./document-store.ts";

/** The entities and relations one row projects to. */
export function membersOfRow(
  schema: Schema,
  root: RowRoot,
  rowId: string,
  json: unknown,
  /** The row as a projection read it from this very JSON (not read again). */
  read?: RowRecord,
): RowMember[] {
  if (json === undefined) return [];
  if (root === RELATIONS) {
    const relation = readRelationRow(rowId, json);
    return [
      {
        type: "relation",
        id: rowId,
        kind: relation.relationKind,
        endpoint0: relation.endpoint0EntityId,
        endpoint1: relation.endpoint1EntityId,
      },
    ];
  }
  const record = read !== undefined && read.json === json ? read : readRow(rowId, json, schema);
  // Built by assignment, not spreads: a push of 33,000 rows projects each twice (as it is, as it was).
  const members: RowMember[] = [];
  for (const entity of record.entities) {
    const member: Mutable<RowMember> = { type: "entity", id: entity.entityId, kind: entity.entityKind };
    if (entity.variantOf !== undefined) member.variantOf = entity.variantOf;
    const identity = identityKey(schema, entity);
    if (identity !== undefined) member.identity = identity;
    const numbers = numberFields(schema, entity);
    if (numbers !== undefined) member.numbers = numbers;
    members.push(member);
  }
  for (const relation of record.relations)
    members.push({
      type: "relation",
      id: relation.relationId,
      kind: relation.relationKind,
      endpoint0: relation.endpoint0EntityId,
      endpoint1: relation.endpoint1EntityId,
    });
  return members;
}

type Mutable<T> = { -readonly [Key in keyof T]: T[Key] };

const numberFieldsOf = new WeakMap<Schema, Map<string, readonly string[]>>();

/** The names of a kind's number fields, in the schema's order (undefined: no such kind). */
function numberFieldNames(schema: Schema, kind: string): readonly string[] | undefined {
  let kinds = numberFieldsOf.get(schema);
  if (kinds === undefined) {
    kinds = new Map();
    numberFieldsOf.set(schema, kinds);
  }
  const known = kinds.get(kind);
  if (known !== undefined) return known;
  const fields = ownValue(schema.entities, kind)?.fields;
  // A kind the schema does not know is not kept (a push may name any).
  if (fields === undefined) return undefined;
  const names = Object.entries(fields)
    .filter(([, spec]) => spec.type === "number")
    .map(([name]) => name);
  kinds.set(kind, names);
  return names;
}

/**
 * An entity's number fields as the store's window index keeps them: its own finite number, or null
 * for a field a variant takes from its base (its value is the base's: a candidate of every window).
 */
function numberFields(
  schema: Schema,
  entity: { entityKind: string; own: Readonly<Record<string, unknown>>; variantOf?: string | undefined },
): Record<string, number | null> | undefined {
  const names = numberFieldNames(schema, entity.entityKind);
  if (names === undefined) return undefined;
  const numbers: Record<string, number | null> = {};
  let found = false;
  for (const name of names) {
    const value = Object.hasOwn(entity.own, name) ? entity.own[name] : undefined;
    if (typeof value === "number" && Number.isFinite(value)) numbers[name] = value;
    else if (value === undefined && entity.variantOf !== undefined) numbers[name] = null;
    else continue;
    found = true;
  }
  return found ? numbers : undefined;
}

/**
 * The rows named, as `projection` holds them now (undefined JSON: the row is gone), with their members;
 * with `previous` (the entity rows as they were, by id), what each projected to before.
 */
export function rowChanges(
  projection: Projection,
  rows: { readonly entities: Iterable<string>; readonly relations: Iterable<string> },
  previous?: ReadonlyMap<string, unknown>,
  /** Those rows as the projection read them then (a shift's 33,000 rows are not read again). */
  previousRead?: ReadonlyMap<string, RowRecord | undefined>,
  /** Each row's maps, for the store's container index (ADR 0514; undefined: not known). */
  containersOf?: (root: RowRoot, rowId: string) => RowChange["containers"],
): RowChange[] {
  const schema = projection.schema;
  const change = (root: RowRoot, rowId: string, json: unknown, read?: RowRecord): RowChange => {
    const made: Mutable<RowChange> = {
      root,
      rowId,
      json,
      members: membersOfRow(schema, root, rowId, json, read),
    };
    // A row's maps as a change carries them: none for a deleted row or when not known.
    const containers = json === undefined ? undefined : containersOf?.(root, rowId);
    if (containers !== undefined) made.containers = containers;
    if (root === ENTITIES && previous?.has(rowId) === true)
      made.previousMembers = membersOfRow(schema, root, rowId, previous.get(rowId), previousRead?.get(rowId));
    return made;
  };
  const changes: RowChange[] = [];
  for (const rowId of rows.entities)
    changes.push(change(ENTITIES, rowId, projection.rowJson(rowId), projection.row(rowId)));
  for (const rowId of rows.relations) changes.push(change(RELATIONS, rowId, projection.relationJson(rowId)));
  return changes;
}

/** Every row of a projection (`containersOf`: each row's maps, for the store's container index). */
export function allRowChanges(
  projection: Projection,
  containersOf?: (root: RowRoot, rowId: string) => RowChange["containers"],
): RowChange[] {
  return rowChanges(
    projection,
    { entities: projection.rowIds(), relations: projection.relationRowIds() },
    undefined,
    undefined,
    containersOf,
  );
}

/** The entity a found member stands for, its own fields only (a variant's base is applied by the caller). */
export function storedEntityOf(
  schema: Schema,
  member: FoundMember,
): { entity: Entity; own: Readonly<Record<string, unknown>> } | undefined {
  const stored = readRow(member.rowId, member.json, schema).entities.find(
    (entity) => entity.entityId === member.id,
  );
  if (stored === undefined) return undefined;
  return {
    entity: {
      entityId: stored.entityId,
      entityKind: stored.entityKind,
      payload: stored.own,
      ...(stored.variantOf === undefined ? {} : { variantOf: stored.variantOf }),
    },
    own: stored.own,
  };
}

/** The relation a found member stands for. */
export function relationOf(member: FoundMember): Relation {
  return {
    relationId: member.id,
    relationKind: member.kind,
    endpoint0EntityId: member.endpoint0 ?? "",
    endpoint1EntityId: member.endpoint1 ?? "",
  };
}
