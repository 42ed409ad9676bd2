/** The schema DSL: entity kinds, relation kinds and whole-document invariants, checked once when defined. */
import type { FieldSpec } from "./field.ts";
import { nullPrototype } from "./own-keys.ts";
import { SchemaDefinitionError } from "./schema-definition-error.ts";
import type { DocumentIssue, DocumentView, Entity } from "./types.ts";

export interface EntityKind {
  readonly fields: Readonly<Record<string, FieldSpec>>;
  /** Fields whose values together name one entity: `create` with the same values returns the existing one. */
  readonly identity?: readonly string[];
  /** Kinds sharing an identity group share one identity space (one medium per stored file, whatever its kind). */
  readonly identityGroup?: string;
  /** Entities of this kind may be variants of another entity of the same kind. */
  readonly variants?: boolean;
  readonly description?: string;
}

/** How a relation shape lives on its holder's row instead of in the relations map. */
export interface SlotSpec {
  /** The key on the holder's row. */
  readonly name: string;
  /** The target entity's whole row is stored in the slot; deleting the holder deletes it. */
  readonly embed?: boolean;
  /** The whole-document check refuses a holder without it. */
  readonly required?: boolean;
}

export type Cardinality = "one-to-one" | "one-to-many" | "many-to-one" | "many-to-many";

/** One allowed pair of endpoint kinds for a relation kind. */
export interface RelationShape {
  readonly from: readonly string[];
  readonly to: readonly string[];
  /** `one-to-many`: one holder, many targets, each target held once. Default `many-to-many`. */
  readonly cardinality?: Cardinality;
  /** Targets of one holder keep an order that `move` changes. */
  readonly ordered?: boolean;
  readonly slot?: SlotSpec;
}

export interface RelationKind {
  readonly shapes: readonly RelationShape[];
  readonly description?: string;
}

/**
 * A whole-document rule. `checkEntity` runs per entity of `kinds` (only those a change touched, when a
 * push is checked); `check` reads the whole document and runs when a change touches one of `kinds`.
 * Issues come back with the constraint `invariant:<name>`.
 */
export interface Invariant {
  readonly name: string;
  readonly kinds?: readonly string[];
  readonly description?: string;
  /**
   * The fields, by entity kind, whose values the invariant reads (it always sees every entity's kind
   * and every relation). Declared, the invariant sees only those fields in the payloads it reads
   * (`checkEntity`'s entity and the view's), so a write of other fields alone cannot change its
   * answer and is not checked again for it: a run shifting 30,000 markers' `startMs` checks no clip.
   * Omitted, it may read any field, and any field write is checked with the neighbours it reaches.
   */
  readonly reads?: Readonly<Record<string, readonly string[]>>;
  readonly checkEntity?: (entity: Entity, view: DocumentView) => Iterable<Omit<DocumentIssue, "constraint">>;
  readonly check?: (view: DocumentView) => Iterable<Omit<DocumentIssue, "constraint">>;
}

export interface SchemaInput {
  readonly name: string;
  readonly entities: Readonly<Record<string, EntityKind>>;
  readonly relations?: Readonly<Record<string, RelationKind | RelationShape>>;
  readonly invariants?: readonly Invariant[];
}

export interface Schema {
  readonly name: string;
  readonly entities: Readonly<Record<string, EntityKind>>;
  readonly relations: Readonly<Record<string, RelationKind>>;
  readonly invariants: readonly Invariant[];
  /** Slots by holder kind: `slots.get("clip")` lists the clip's marker and content slots. */
  readonly slots: ReadonlyMap<string, readonly SlotBinding[]>;
  /** Kinds that exist only embedded in a holder's row. */
  readonly embeddedKinds: ReadonlySet<string>;
}

export interface SlotBinding {
  readonly relationKind: string;
  readonly shape: RelationShape;
  readonly slot: SlotSpec;
}

const namePattern = /^[a-z][a-zA-Z0-9-]*$/;

/** Defines a schema; a mistake in the definition throws `SchemaDefinitionError` naming it. */
export function defineSchema(input: SchemaInput): Schema {
  const problems: string[] = [];
  for (const [kind, spec] of Object.entries(input.entities)) {
    if (!namePattern.test(kind)) problems.push(`entity kind "${kind}" is not a valid name`);
    for (const [name, fieldSpec] of Object.entries(spec.fields)) {
      checkFieldName(`${kind}.${name}`, name, problems);
      checkField(`${kind}.${name}`, fieldSpec, problems);
    }
    for (const name of spec.identity ?? []) {
      if (!Object.hasOwn(spec.fields, name))
        problems.push(`entity kind "${kind}" names unknown identity field "${name}"`);
    }
  }
  const relations: Record<string, RelationKind> = Object.create(null);
  const slots = new Map<string, SlotBinding[]>();
  const embeddedKinds = new Set<string>();
  for (const [kind, raw] of Object.entries(input.relations ?? {})) {
    if (!namePattern.test(kind)) problems.push(`relation kind "${kind}" is not a valid name`);
    const relationKind: RelationKind = "shapes" in raw ? raw : { shapes: [raw] };
    relations[kind] = relationKind;
    for (const shape of relationKind.shapes) {
      for (const endpoint of [...shape.from, ...shape.to]) {
        if (!Object.hasOwn(input.entities, endpoint))
          problems.push(`relation kind "${kind}" names unknown entity kind "${endpoint}"`);
      }
      if (shape.slot === undefined) continue;
      const cardinality = shape.cardinality ?? "many-to-many";
      if (cardinality === "one-to-many" || cardinality === "many-to-many") {
        problems.push(
          `relation kind "${kind}": a slot holds one target, so its cardinality must end in "-to-one"`,
        );
      }
      if (shape.ordered) problems.push(`relation kind "${kind}": a slot cannot be ordered`);
      for (const holder of shape.from) {
        const list = slots.get(holder) ?? [];
        if (list.some((binding) => binding.slot.name === shape.slot?.name)) {
          problems.push(`entity kind "${holder}" has two slots named "${shape.slot.name}"`);
        }
        list.push({ relationKind: kind, shape, slot: shape.slot });
        slots.set(holder, list);
      }
      if (shape.slot.embed) for (const target of shape.to) embeddedKinds.add(target);
    }
  }
  for (const invariant of input.invariants ?? [])
    for (const [kind, names] of Object.entries(invariant.reads ?? {})) {
      const fields = Object.hasOwn(input.entities, kind) ? input.entities[kind]?.fields : undefined;
      if (fields === undefined)
        problems.push(`invariant "${invariant.name}" reads unknown entity kind "${kind}"`);
      else
        for (const name of names)
          if (!Object.hasOwn(fields, name))
            problems.push(`invariant "${invariant.name}" reads unknown field "${kind}.${name}"`);
    }
  if (problems.length > 0) throw new SchemaDefinitionError(input.name, problems);
  // Kinds and fields live in maps without a prototype: a name a script or a push chose finds only what
  // the schema defines ("constructor" is no kind, "__proto__" no field).
  const entities = nullPrototype(
    Object.fromEntries(
      Object.entries(input.entities).map(([kind, spec]) => [
        kind,
        { ...spec, fields: ownFields(spec.fields) },
      ]),
    ),
  );
  return {
    name: input.name,
    entities,
    relations,
    invariants: input.invariants ?? [],
    slots,
    embeddedKinds,
  };
}

/** Field specs with every nested record's fields in a map without a prototype. */
function ownFields(fields: Readonly<Record<string, FieldSpec>>): Record<string, FieldSpec> {
  const own: Record<string, FieldSpec> = Object.create(null);
  for (const [name, spec] of Object.entries(fields)) {
    if (spec.type === "record") own[name] = { ...spec, fields: ownFields(spec.fields) };
    else if (spec.type === "list" && spec.items.type === "record")
      own[name] = { ...spec, items: { ...spec.items, fields: ownFields(spec.items.fields) } };
    else own[name] = spec;
  }
  return own;
}

/**
 * "__proto__" can be no field: a row read from Loro (`toJSON`) or a payload copied with `[]` takes it
 * as the prototype, so no value of it is ever found and no entity of its kind could be made.
 */
function checkFieldName(path: string, name: string, problems: string[]): void {
  if (name === "__proto__") problems.push(`${path}: "__proto__" cannot be a field name`);
}

function checkField(path: string, spec: FieldSpec, problems: string[]): void {
  if (spec.type === "list") {
    if ((spec.items as FieldSpec).type === "text" || (spec.items as FieldSpec).type === "list") {
      problems.push(`${path}: list items must be scalars or records`);
    }
    if (spec.items.type === "record") checkItemRecord(`${path}[]`, spec.items.fields, problems);
  }
  if (spec.type === "record") {
    for (const [name, sub] of Object.entries(spec.fields)) {
      checkFieldName(`${path}.${name}`, name, problems);
      checkField(`${path}.${name}`, sub, problems);
    }
  }
}

function checkItemRecord(
  path: string,
  fields: Readonly<Record<string, FieldSpec>>,
  problems: string[],
): void {
  for (const [name, sub] of Object.entries(fields)) {
    checkFieldName(`${path}.${name}`, name, problems);
    if (sub.type === "text" || sub.type === "list")
      problems.push(`${path}.${name}: a list item holds no text or list`);
    if (sub.type === "record") checkItemRecord(`${path}.${name}`, sub.fields, problems);
  }
}
