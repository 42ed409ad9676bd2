/** The contract's view of a document: entities, relations, and the issues a check reports. */

/** An entity as a script reads it: a variant reads with its base applied. */
export interface Entity {
  readonly entityId: string;
  readonly entityKind: string;
  readonly payload: Readonly<Record<string, unknown>>;
  /** The base this entity is a variant of. */
  readonly variantOf?: string;
}

/** A relation between two entities; `endpoint0` is the holder (a track holds its clips). */
export interface Relation {
  readonly relationId: string;
  readonly relationKind: string;
  readonly endpoint0EntityId: string;
  readonly endpoint1EntityId: string;
}

/** One failed constraint, naming what failed and where. */
export interface DocumentIssue {
  /** The constraint's name, e.g. `field.type`, `relation.cardinality`, `slot.required`, `invariant:<name>`. */
  readonly constraint: string;
  readonly message: string;
  readonly entityId?: string;
  readonly relationId?: string;
  /** The payload path inside the entity, empty when the issue is about the entity or relation as a whole. */
  readonly path: readonly (string | number)[];
}

/** What invariants read: the projected document. */
export interface DocumentView {
  entities(entityKind?: string): Iterable<Entity>;
  entity(entityId: string): Entity | undefined;
  relations(relationKind?: string): Iterable<Relation>;
  /** Relations touching `entityId`, ordered ones in their order. */
  relationsOf(entityId: string, relationKind?: string): Relation[];
}
