/**
 * The constraints of a projected document. Checks split in two: those every write must keep
 * (types, kinds, endpoints, cardinality, identity) and the deferred ones a script may break while it
 * works (a Clip without its marker yet; invariants), which the whole-document check enforces.
 */

import type { RelationShape, Schema } from "../schema/define-schema.ts";
import type { FieldSpec } from "../schema/field.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue, DocumentView, Entity } from "../schema/types.ts";
import { validatePayload } from "../schema/validate-payload.ts";
import type { Projection } from "./projection.ts";
import type { StoredEntity, StoredRelation } from "./row-shape.ts";

const deferredConstraints = new Set(["slot.required", "slot.embedded"]);

/** True for constraints a script may break mid-way; the whole-document check still enforces them. */
export function isDeferred(issue: DocumentIssue): boolean {
  return deferredConstraints.has(issue.constraint) || issue.constraint.startsWith("invariant:");
}

export interface CheckScope {
  readonly entityIds: Iterable<string>;
  readonly relationIds: Iterable<string>;
  /**
   * The entities whose invariants are checked (default: `entityIds`): a write leaves out those whose
   * invariants' answers it cannot change (a relation moved among its holder's others, ADR 0512).
   */
  readonly invariantEntityIds?: Iterable<string>;
}

export interface CheckOptions {
  /**
   * False: the schema's invariants are not checked. Exact for a write of fields no invariant reads
   * (`invariantsRead`), whose answers it cannot change; their issues are the same before and after.
   */
  readonly invariants?: boolean;
}

/** Every issue of the whole document, or only of the entities and relations in `scope` (plus invariants). */
export function checkDocument(
  projection: Projection,
  scope?: CheckScope,
  options: CheckOptions = {},
): DocumentIssue[] {
  const issues: DocumentIssue[] = [];
  for (const _step of checkSteps(projection, issues, scope, options));
  // Sorted, so every replica and every reader lists the same issues in the same order.
  return issues.sort(compareIssues);
}

/**
 * `checkDocument`'s work a step at a time (an entity, a relation, an invariant of one entity or of the
 * document), each step's issues pushed onto `issues` unsorted: a large created document is checked
 * with the event loop let run between steps (ADR 0560: the whole check at once held it ~0.3–0.4 s at
 * 5 MB).
 */
export function* checkSteps(
  projection: Projection,
  issues: DocumentIssue[],
  scope?: CheckScope,
  options: CheckOptions = {},
): Generator<void, void, undefined> {
  const schema = projection.schema;
  const scopeIds = scope === undefined ? [] : [...scope.entityIds];
  const invariantIds = scope?.invariantEntityIds === undefined ? scopeIds : [...scope.invariantEntityIds];
  const entityIds = scope === undefined ? projection.entityIds() : scopeIds;
  const relationIds = scope === undefined ? projection.relationIds() : scope.relationIds;
  const kinds = new Set<string>();
  for (const entityId of entityIds) {
    const stored = projection.stored(entityId);
    if (stored !== undefined) kinds.add(stored.entityKind);
    issues.push(...checkEntity(projection, entityId));
    yield;
  }
  for (const relationId of relationIds) {
    issues.push(...checkRelation(projection, relationId));
    yield;
  }
  for (const invariant of options.invariants === false ? [] : schema.invariants) {
    const constraint = `invariant:${invariant.name}`;
    const reads = invariant.reads;
    const view = reads === undefined ? projection : declaredView(projection, reads);
    if (invariant.checkEntity !== undefined) {
      const ids = scope === undefined ? projection.entityIds() : invariantIds;
      for (const entityId of ids) {
        const shared = projection.sharedEntity(entityId);
        if (shared === undefined || !invariant.kinds?.includes(shared.entityKind)) continue;
        const entity = reads === undefined ? shared : onlyFields(shared, reads);
        for (const issue of invariant.checkEntity(entity, view)) issues.push({ ...issue, constraint });
        yield;
      }
    }
    if (invariant.check === undefined) continue;
    if (
      scope !== undefined &&
      invariant.kinds !== undefined &&
      !invariant.kinds.some((kind) => kinds.has(kind))
    )
      continue;
    for (const issue of invariant.check(view)) issues.push({ ...issue, constraint });
    yield;
  }
}

/** An entity as an invariant that declares what it `reads` sees it: only those fields of its kind. */
function onlyFields(entity: Entity, reads: Readonly<Record<string, readonly string[]>>): Entity {
  const payload: Record<string, unknown> = {};
  for (const name of ownValue(reads, entity.entityKind) ?? [])
    if (Object.hasOwn(entity.payload, name)) {
      const value = entity.payload[name];
      // A copy, as the whole view's reads are: an invariant changing what it read changes nothing.
      payload[name] = typeof value === "object" && value !== null ? structuredClone(value) : value;
    }
  return { ...entity, payload };
}

/**
 * The document as an invariant that declares what it `reads` sees it: every kind and relation, and of
 * each payload only the declared fields. Its answer then depends on nothing else, so a write of other
 * fields need not check it again (`invariantsRead`).
 */
function declaredView(
  projection: Projection,
  reads: Readonly<Record<string, readonly string[]>>,
): DocumentView {
  return {
    *entities(entityKind) {
      for (const entity of projection.entities(entityKind)) yield onlyFields(entity, reads);
    },
    entity(entityId) {
      const entity = projection.sharedEntity(entityId);
      return entity === undefined ? undefined : onlyFields(entity, reads);
    },
    relations: (relationKind) => projection.relations(relationKind),
    relationsOf: (entityId, relationKind) => projection.relationsOf(entityId, relationKind),
  };
}

/**
 * Whether some invariant may read field `field` of a `kind` entity: one that declares it in its
 * `reads`, or one that declares nothing (it may read any field). A write of fields no invariant reads
 * cannot change an invariant's answer anywhere.
 */
export function invariantsRead(schema: Schema, kind: string, field: string): boolean {
  return schema.invariants.some(
    (invariant) =>
      invariant.reads === undefined || (ownValue(invariant.reads, kind)?.includes(field) ?? false),
  );
}

/**
 * The payload issues last found per payload object. A stored payload is never changed in place (an
 * update stages a new one, sharing only what it did not touch), and a building session checks a
 * track's or a clip's payload again with every write that links to it: the same object checked
 * against the same fields for the same entity has the same issues.
 */
const checkedPayloads = new WeakMap<
  object,
  { fields: Readonly<Record<string, FieldSpec>>; entityId: string; issues: readonly DocumentIssue[] }
>();

function payloadIssues(
  fields: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
  entityId: string,
): readonly DocumentIssue[] {
  const known = checkedPayloads.get(payload);
  if (known !== undefined && known.fields === fields && known.entityId === entityId) return known.issues;
  const issues = validatePayload(fields, payload, entityId);
  checkedPayloads.set(payload, { fields, entityId, issues });
  return issues;
}

/**
 * Checks the payloads of `entities` ahead of their check (a push's staged rows, as they were and as
 * they are after it, while the run goes on): that check then finds their issues remembered. Not a
 * variant's: it is checked with its base's fields under its own.
 */
export function checkPayloadsAhead(schema: Schema, entities: Iterable<StoredEntity>): void {
  for (const entity of entities) {
    if (entity.variantOf !== undefined) continue;
    const kind = ownValue(schema.entities, entity.entityKind);
    if (kind !== undefined) payloadIssues(kind.fields, entity.own, entity.entityId);
  }
}

/** The issues of one entity: its row's shape, kind, payload, variant, slots and identity. */
export function checkEntity(projection: Projection, entityId: string): DocumentIssue[] {
  const claims = projection.claimsOf(entityId);
  const stored = claims[0];
  if (stored === undefined) return [];
  const issues: DocumentIssue[] = [];
  for (const claim of claims) issues.push(...(claim.shapeIssues ?? []));
  if (claims.length > 1) issues.push(duplicateClaimIssue(projection, entityId));
  const schema = projection.schema;
  const kind = ownValue(schema.entities, stored.entityKind);
  if (kind === undefined) {
    if (stored.entityKind !== "") {
      issues.push({
        constraint: "entity.kind",
        message: `"${stored.entityKind}" is not an entity kind of schema "${schema.name}"`,
        entityId,
        path: [],
      });
    }
    return issues;
  }
  const entity = projection.sharedEntity(entityId);
  if (entity === undefined) return issues;
  if (stored.variantOf !== undefined) issues.push(...checkVariant(projection, entityId));
  issues.push(...payloadIssues(kind.fields, entity.payload, entityId));
  if (schema.embeddedKinds.has(stored.entityKind) && stored.holder === undefined) {
    issues.push({
      constraint: "slot.embedded",
      message: `a ${stored.entityKind} must be linked to its holder; it is stored on the holder's row`,
      entityId,
      path: [],
    });
  }
  for (const binding of schema.slots.get(stored.entityKind) ?? []) {
    if (!binding.slot.required) continue;
    const held = projection
      .storedRelationsOf(entityId, binding.relationKind)
      .some((relation) => relation.slot === binding.slot.name && relation.endpoint0EntityId === entityId);
    if (!held) {
      issues.push({
        constraint: "slot.required",
        message: `a ${stored.entityKind} needs its ${binding.slot.name} (relation "${binding.relationKind}" to one of ${binding.shape.to.join(", ")})`,
        entityId,
        path: [],
      });
    }
  }
  if (kind.identity !== undefined && kind.identity.length > 0) {
    const others = projection.sameIdentity(stored).filter((otherId) => otherId !== entityId);
    if (others.length > 0) {
      issues.push({
        constraint: "entity.identity",
        message: `${others.join(", ")} already stands for ${kind.identity.map((name) => `${name}=${JSON.stringify(entity.payload[name])}`).join(", ")}`,
        entityId,
        path: [],
      });
    }
  }
  return issues;
}

function duplicateClaimIssue(projection: Projection, entityId: string): DocumentIssue {
  const claims = projection.claimsOf(entityId);
  const holders = claims.map((claim) => claim.holder);
  if (holders.every((holder) => holder !== undefined)) {
    const relationKind =
      projection.schema.slots
        .get(projection.stored(holders[0]?.entityId ?? "")?.entityKind ?? "")
        ?.find((binding) => binding.slot.name === holders[0]?.slot)?.relationKind ?? "slot";
    return {
      constraint: "relation.cardinality",
      message: `${entityId} is held by ${holders.map((holder) => holder?.entityId).join(" and ")} through "${relationKind}"; it belongs to one holder`,
      entityId,
      path: [],
    };
  }
  return {
    constraint: "entity.unique",
    message: `${claims.length} rows claim the id ${entityId}`,
    entityId,
    path: [],
  };
}

function checkVariant(projection: Projection, entityId: string): DocumentIssue[] {
  const seen = new Set<string>([entityId]);
  const stored = projection.stored(entityId);
  if (stored?.variantOf === undefined) return [];
  const issue = (message: string): DocumentIssue[] => [
    { constraint: "entity.variant", message, entityId, path: [] },
  ];
  if (!ownValue(projection.schema.entities, stored.entityKind)?.variants)
    return issue(`a ${stored.entityKind} cannot be a variant`);
  let current: string | undefined = stored.variantOf;
  while (current !== undefined) {
    if (seen.has(current)) return issue(`the variant chain loops through ${current}`);
    seen.add(current);
    const base = projection.stored(current);
    if (base === undefined) return issue(`its base ${current} does not exist`);
    if (base.entityKind !== stored.entityKind)
      return issue(`its base ${current} is a ${base.entityKind}, not a ${stored.entityKind}`);
    current = base.variantOf;
  }
  return [];
}

/** The shape a relation matches, by its endpoints' kinds. */
export function matchShape(
  schema: Schema,
  relationKind: string,
  fromKind: string,
  toKind: string,
): RelationShape | undefined {
  return ownValue(schema.relations, relationKind)?.shapes.find(
    (shape) => shape.from.includes(fromKind) && shape.to.includes(toKind),
  );
}

/** The issues of one relation: kind, endpoints, endpoint kinds and cardinality. */
export function checkRelation(projection: Projection, relationId: string): DocumentIssue[] {
  const claims = projection.relationClaimsOf(relationId);
  const relation = claims[0];
  if (relation === undefined) return [];
  const issues: DocumentIssue[] = [...(relation.shapeIssues ?? [])];
  if (issues.length > 0) return issues;
  const schema = projection.schema;
  const issue = (constraint: string, message: string): DocumentIssue => ({
    constraint,
    message,
    relationId,
    path: [],
  });
  if (claims.length > 1)
    issues.push(issue("relation.unique", `${claims.length} rows claim the relation id ${relationId}`));
  if (ownValue(schema.relations, relation.relationKind) === undefined) {
    return [
      ...issues,
      issue("relation.kind", `"${relation.relationKind}" is not a relation kind of schema "${schema.name}"`),
    ];
  }
  const from = projection.stored(relation.endpoint0EntityId);
  const to = projection.stored(relation.endpoint1EntityId);
  if (from === undefined)
    issues.push(issue("relation.endpoint", `endpoint0 ${relation.endpoint0EntityId} does not exist`));
  if (to === undefined)
    issues.push(issue("relation.endpoint", `endpoint1 ${relation.endpoint1EntityId} does not exist`));
  if (from === undefined || to === undefined) return issues;
  const shape = matchShape(schema, relation.relationKind, from.entityKind, to.entityKind);
  if (shape === undefined) {
    issues.push(
      issue(
        "relation.endpoint-kind",
        `"${relation.relationKind}" does not link a ${from.entityKind} to a ${to.entityKind}`,
      ),
    );
    return issues;
  }
  if (relation.slot === undefined && shape.slot !== undefined) {
    issues.push(
      issue(
        "relation.slot",
        `"${relation.relationKind}" from a ${from.entityKind} is stored in its "${shape.slot.name}" slot`,
      ),
    );
  }
  const cardinality = shape.cardinality ?? "many-to-many";
  const sameShape = (other: StoredRelation): boolean => {
    if (other.relationKind !== relation.relationKind) return false;
    const otherFrom = projection.stored(other.endpoint0EntityId);
    const otherTo = projection.stored(other.endpoint1EntityId);
    return (
      otherFrom !== undefined &&
      otherTo !== undefined &&
      matchShape(schema, other.relationKind, otherFrom.entityKind, otherTo.entityKind) === shape
    );
  };
  if (cardinality.endsWith("-to-one")) {
    const held = projection
      .storedRelationsOf(relation.endpoint0EntityId)
      .filter((other) => other.endpoint0EntityId === relation.endpoint0EntityId && sameShape(other));
    if (held.length > 1) {
      issues.push(
        issue(
          "relation.cardinality",
          `${relation.endpoint0EntityId} holds ${held.length} "${relation.relationKind}" relations; it may hold one (${cardinality})`,
        ),
      );
    }
  }
  if (cardinality.startsWith("one-to-")) {
    const holders = projection
      .storedRelationsOf(relation.endpoint1EntityId)
      .filter((other) => other.endpoint1EntityId === relation.endpoint1EntityId && sameShape(other));
    if (holders.length > 1) {
      issues.push(
        issue(
          "relation.cardinality",
          `${relation.endpoint1EntityId} is held by ${holders.map((other) => other.endpoint0EntityId).join(" and ")} through "${relation.relationKind}"; it may have one holder (${cardinality})`,
        ),
      );
    }
  }
  return issues;
}

/** A stable key per issue, to tell issues a change introduced from those that were already there. */
export function issueKey(issue: DocumentIssue): string {
  return JSON.stringify([issue.constraint, issue.entityId ?? null, issue.relationId ?? null, issue.path]);
}

/**
 * What a change reaches: the entities of the rows it wrote with every relation touching them,
 * `extraEntities` themselves, the relations it wrote, those relations' endpoints, and every variant
 * built on the entities. An endpoint's other relations stay out: a new cardinality break always involves a relation
 * the change wrote, so checking that one finds it, and a hub (a track of 50 000 clips) costs nothing.
 * Entities standing for the same identity as a touched one are in reach too (a clash names both).
 */
export function changeScope(
  projection: Projection,
  rows: { readonly entities: Iterable<string>; readonly relations: Iterable<string> },
  extraEntities: Iterable<string> = [],
): { entityIds: Set<string>; relationIds: Set<string> } {
  const touched = new Set<string>();
  const relationIds = new Set<string>(rows.relations);
  for (const rowId of rows.entities) {
    touched.add(rowId);
    for (const entity of projection.row(rowId)?.entities ?? []) touched.add(entity.entityId);
    for (const relation of projection.row(rowId)?.relations ?? []) relationIds.add(relation.relationId);
  }
  for (const entityId of touched)
    for (const relationId of projection.relationIdsOf(entityId)) relationIds.add(relationId);
  // Entities named besides the rows (a link's ends, a new entity) are checked themselves, without
  // their other relations: a link into a track of 10,000 clips checks the link, not the track's clips.
  for (const entityId of extraEntities) touched.add(entityId);
  const entityIds = new Set<string>(touched);
  for (const relationId of relationIds) {
    for (const relation of projection.relationClaimsOf(relationId)) {
      entityIds.add(relation.endpoint0EntityId);
      entityIds.add(relation.endpoint1EntityId);
    }
  }
  for (const entityId of [...entityIds])
    for (const variantId of projection.variantsOf(entityId)) entityIds.add(variantId);
  // An identity clash is an issue of both entities: the one the change did not touch too.
  for (const entityId of touched) {
    for (const claim of projection.claimsOf(entityId))
      for (const otherId of projection.sameIdentity(claim)) entityIds.add(otherId);
  }
  return { entityIds, relationIds };
}

/**
 * What a write of entities' fields alone reaches (ADR 0483, 0487): those entities, their variants
 * (which take the fields) and the entities of their identity; no relation (endpoints, slots and
 * cardinality read no field value). Exact only when no invariant reads a field written
 * (`invariantsRead`): an invariant over a neighbour could otherwise change its answer.
 */
export function fieldScope(
  projection: Projection,
  entityIdsWritten: Iterable<string>,
): { entityIds: Set<string>; relationIds: Set<string> } {
  const written = [...entityIdsWritten];
  const entityIds = new Set<string>(written);
  for (const entityId of written) {
    for (const variantId of projection.variantsOf(entityId)) entityIds.add(variantId);
    for (const claim of projection.claimsOf(entityId))
      for (const otherId of projection.sameIdentity(claim)) entityIds.add(otherId);
  }
  return { entityIds, relationIds: new Set<string>() };
}

export function compareIssues(left: DocumentIssue, right: DocumentIssue): number {
  const leftKey = issueKey(left);
  const rightKey = issueKey(right);
  const leftWhere = left.entityId ?? left.relationId ?? "";
  const rightWhere = right.entityId ?? right.relationId ?? "";
  if (leftWhere !== rightWhere) return leftWhere < rightWhere ? -1 : 1;
  return leftKey < rightKey ? -1 : leftKey > rightKey ? 1 : 0;
}
