/**
 * What a stored row is: the entities and relations one `entities` or `relations` row of the Loro
 * document projects to (read with the shape problems a malformed row has), and the orders and
 * identity keys the projections and checks compare them by.
 */

import type { Schema } from "../schema/define-schema.ts";
import { isPlainRecord, ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue, Relation } from "../schema/types.ts";
import { EMBEDDED_ID, ROW_FIELDS, ROW_KIND, ROW_SLOTS, ROW_VARIANT_OF, slotRelationId } from "./layout.ts";

/** An entity as stored: its own fields (a variant stores only what it overrides). */
export interface StoredEntity {
  readonly entityId: string;
  readonly entityKind: string;
  readonly own: Readonly<Record<string, unknown>>;
  readonly variantOf?: string;
  /** The top-level row that stores it: its own id, or its holder's for an embedded entity. */
  readonly rowId: string;
  /** Set for an entity embedded in a holder's slot. */
  readonly holder?: { readonly entityId: string; readonly slot: string };
  /** Shape problems found while reading the row (a push that wrote a malformed row). */
  readonly shapeIssues?: readonly DocumentIssue[];
}

export interface StoredRelation extends Relation {
  readonly position?: string;
  readonly json?: unknown;
  /** Set for a relation stored in a holder's slot. */
  readonly slot?: string;
  readonly shapeIssues?: readonly DocumentIssue[];
}

export interface RowRecord {
  readonly entities: readonly StoredEntity[];
  readonly relations: readonly StoredRelation[];
  /** The row as read, to put it back when a staged change is undone. */
  readonly json?: unknown;
}

/** The identity an entity stands for under `schema` (kinds with an identity), as one key. */
export function identityKey(
  schema: Schema,
  entity: Pick<StoredEntity, "entityKind" | "own">,
): string | undefined {
  const kind = ownValue(schema.entities, entity.entityKind);
  if (kind?.identity === undefined || kind.identity.length === 0) return undefined;
  const values = kind.identity.map((name) => entity.own[name] ?? null);
  return JSON.stringify([kind.identityGroup ?? entity.entityKind, ...values]);
}

export function compareRelations(left: StoredRelation, right: StoredRelation): number {
  return (
    compareText(left.relationKind, right.relationKind) ||
    compareText(left.endpoint0EntityId, right.endpoint0EntityId) ||
    compareText(left.position ?? "", right.position ?? "") ||
    compareText(left.relationId, right.relationId)
  );
}

export function compareIds(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

function compareText(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

export function publicRelation(relation: StoredRelation): Relation {
  return {
    relationId: relation.relationId,
    relationKind: relation.relationKind,
    endpoint0EntityId: relation.endpoint0EntityId,
    endpoint1EntityId: relation.endpoint1EntityId,
  };
}

/** A map read from a row: only own keys (a key named `__proto__` makes it no record at all). */
const isRecord = isPlainRecord;

const entityRowKeys = new Set([ROW_KIND, ROW_VARIANT_OF, ROW_FIELDS, ROW_SLOTS]);
const embeddedRowKeys = new Set([EMBEDDED_ID, ROW_KIND, ROW_FIELDS]);
const relationRowKeys = new Set(["kind", "endpoint0", "endpoint1", "position"]);

/** Keys of a row map the mapping does not define: stored, they would hold what no check reads. */
function unknownKeys(row: Record<string, unknown>, known: ReadonlySet<string>): string[] {
  return Object.keys(row).filter((key) => !known.has(key));
}

function shapeIssue(entityId: string, message: string, path: (string | number)[] = []): DocumentIssue {
  return { constraint: "document.shape", message, entityId, path };
}

/** One `entities` row: the entity, the entities embedded in its slots, and the relations its slots hold. */
export function readRow(rowId: string, json: unknown, schema: Schema): RowRecord {
  const issues: DocumentIssue[] = [];
  const row = isRecord(json) ? json : {};
  if (!isRecord(json)) issues.push(shapeIssue(rowId, "the row is not a map"));
  for (const key of unknownKeys(row, entityRowKeys))
    issues.push(shapeIssue(rowId, `the row has a key "${key}" the mapping does not define`));
  if (row[ROW_VARIANT_OF] !== undefined && typeof row[ROW_VARIANT_OF] !== "string")
    issues.push(shapeIssue(rowId, "the row's variantOf is not an entity id"));
  const kind = typeof row[ROW_KIND] === "string" ? (row[ROW_KIND] as string) : "";
  if (kind === "") issues.push(shapeIssue(rowId, "the row names no kind"));
  const fields = isRecord(row[ROW_FIELDS]) ? (row[ROW_FIELDS] as Record<string, unknown>) : {};
  if (!isRecord(row[ROW_FIELDS])) issues.push(shapeIssue(rowId, "the row has no fields map"));
  const variantOf = row[ROW_VARIANT_OF];
  // Literals, not spreads: a page of 5,000 rows is read at once, each row again when written.
  const entity: StoredEntity =
    typeof variantOf === "string"
      ? { entityId: rowId, entityKind: kind, own: fields, rowId, variantOf, shapeIssues: issues }
      : // `shapeIssues` is filled while the slots are read below.
        { entityId: rowId, entityKind: kind, own: fields, rowId, shapeIssues: issues };
  const entities: StoredEntity[] = [entity];
  const relations: StoredRelation[] = [];
  const slots = row[ROW_SLOTS];
  if (slots === undefined) return { entities, relations };
  if (!isRecord(slots)) {
    issues.push(shapeIssue(rowId, "the row's slots are not a map"));
    return { entities, relations };
  }
  const bindings = schema.slots.get(kind) ?? [];
  for (const slotName of Object.keys(slots)) {
    const value = slots[slotName];
    const binding = bindings.find((candidate) => candidate.slot.name === slotName);
    const relationId = slotRelationId(rowId, slotName);
    if (binding === undefined) {
      issues.push(shapeIssue(rowId, `the row has a slot "${slotName}" its kind does not declare`));
      continue;
    }
    if (value === null || value === undefined) continue;
    let targetId: string;
    if (binding.slot.embed) {
      if (!isRecord(value) || typeof value[EMBEDDED_ID] !== "string" || typeof value[ROW_KIND] !== "string") {
        issues.push(shapeIssue(rowId, `slot "${slotName}" does not hold an embedded row`));
        continue;
      }
      targetId = value[EMBEDDED_ID] as string;
      const embeddedFields = value[ROW_FIELDS];
      const unknown = unknownKeys(value, embeddedRowKeys);
      const embedded: StoredEntity = {
        entityId: targetId,
        entityKind: value[ROW_KIND] as string,
        own: isRecord(embeddedFields) ? embeddedFields : {},
        rowId,
        holder: { entityId: rowId, slot: slotName },
      };
      entities.push(
        isRecord(embeddedFields) && unknown.length === 0
          ? embedded
          : {
              ...embedded,
              shapeIssues: [
                ...(isRecord(embeddedFields)
                  ? []
                  : [shapeIssue(targetId, "the embedded row has no fields map")]),
                ...unknown.map((key) =>
                  shapeIssue(targetId, `the embedded row has a key "${key}" the mapping does not define`),
                ),
              ],
            },
      );
    } else {
      if (typeof value !== "string") {
        issues.push(shapeIssue(rowId, `slot "${slotName}" does not hold an entity id`));
        continue;
      }
      targetId = value;
    }
    relations.push({
      relationId,
      relationKind: binding.relationKind,
      endpoint0EntityId: rowId,
      endpoint1EntityId: targetId,
      slot: slotName,
    });
  }
  return { entities, relations };
}

export function readRelationRow(relationId: string, json: unknown): StoredRelation {
  const row = isRecord(json) ? json : {};
  const text = (key: string): string => (typeof row[key] === "string" ? (row[key] as string) : "");
  const relation = {
    relationId,
    relationKind: text("kind"),
    endpoint0EntityId: text("endpoint0"),
    endpoint1EntityId: text("endpoint1"),
    ...(typeof row.position === "string" ? { position: row.position } : {}),
  };
  const problems = [
    ...(relation.relationKind === "" || relation.endpoint0EntityId === "" || relation.endpoint1EntityId === ""
      ? ["the relation row lacks its kind or an endpoint"]
      : []),
    ...(isRecord(json) ? [] : ["the relation row is not a map"]),
    ...(row.position !== undefined && typeof row.position !== "string"
      ? ["the relation row's position is not a position key"]
      : []),
    ...unknownKeys(row, relationRowKeys).map(
      (key) => `the relation row has a key "${key}" the mapping does not define`,
    ),
  ];
  if (problems.length > 0) {
    return {
      ...relation,
      shapeIssues: problems.map((message) => ({
        constraint: "document.shape",
        message,
        relationId,
        path: [],
      })),
    };
  }
  return relation;
}

/** Whether two rows' slot relations are the same, key for key (they are flat records). */
export function sameRelations(left: readonly StoredRelation[], right: readonly StoredRelation[]): boolean {
  if (left === right) return true;
  return (
    left.length === right.length &&
    left.every((a, index) => {
      const b = (right[index] ?? {}) as Record<string, unknown>;
      const keys = Object.keys(a);
      return (
        keys.length === Object.keys(b).length &&
        keys.every((key) => a[key as keyof StoredRelation] === b[key])
      );
    })
  );
}
