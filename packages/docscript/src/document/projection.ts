/**
 * The entities and relations a Loro document projects to, indexed for checks and reads. It is rebuilt
 * row by row: a push re-reads only the rows it touched, and puts them back if the push is refused.
 * What a row projects to is read by `row-shape.ts`.
 */

import { copyValue } from "../schema/copy-value.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentView, Entity, Relation } from "../schema/types.ts";
import { appended, type IdSet, IdSetWrites, idCount, idsIn, without } from "./id-sets.ts";
import { keepFirst } from "./keep-first.ts";
import { LayeredMap } from "./layered-map.ts";
import {
  compareIds,
  compareRelations,
  identityKey,
  publicRelation,
  type RowRecord,
  readRelationRow,
  readRow,
  type StoredEntity,
  type StoredRelation,
  sameRelations,
} from "./row-shape.ts";

/**
 * What a check looked up: a row by id, an entity's or relation's claims, the relations of an entity
 * (of one kind, or all), the variants built on an entity, the entities of one identity, or everything.
 */
export type Lookup =
  | "row"
  | "relationRow"
  | "entity"
  | "relation"
  | "endpoint"
  | "variants"
  | "identity"
  | "whole";

/**
 * Thrown by a write whose checks looked up what the projection does not hold yet (`lacking`): nothing
 * landed and the projection is as before; the caller fills what was lacking and writes again.
 */
export class RowsNeeded extends Error {
  constructor() {
    super("the write's checks need rows the projection does not hold yet");
    this.name = "RowsNeeded";
  }
}

export class Projection implements DocumentView {
  readonly schema: Schema;
  protected rows: Map<string, RowRecord> = new Map();
  /** Usually one claim per id; two rows claiming one id is a conflict the check names. */
  protected claims: Map<string, readonly StoredEntity[]> = new Map();
  protected relationRows: Map<string, StoredRelation> = new Map();
  private claimsOfRelations: Map<string, readonly StoredRelation[]> = new Map();
  /**
   * Relation ids by endpoint: one id as a string, a few in an array, many in a set (`IdSet`). A set
   * costs ~500 bytes, and 33,000 clips held (each the endpoint of two or three relations) made ~80,000.
   */
  private relationsByEntity: Map<string, IdSet> = new Map();
  /**
   * Relations of rows set since the indexes were read (a shift's 33,000 clips never ask for theirs).
   */
  private unindexed: StoredRelation[] = [];
  /** Entity ids by identity (group and identity field values), for "one medium per file". */
  protected identities: Map<string, readonly string[]> = new Map();
  /** Variant ids by base id: a change to a base is checked on its variants too. */
  protected variants: Map<string, Set<string>> = new Map();
  /** How the id sets of the indexes change: copy on write on an overlay (`IdSetWrites`). */
  private sets = new IdSetWrites(undefined);

  /** Relation claims by relation id, every relation set so far indexed. */
  protected get relationClaims(): Map<string, readonly StoredRelation[]> {
    if (this.unindexed.length > 0) this.indexRelations();
    return this.claimsOfRelations;
  }

  /** Relation ids by endpoint, every relation set so far indexed. */
  protected get byEntity(): Map<string, IdSet> {
    if (this.unindexed.length > 0) this.indexRelations();
    return this.relationsByEntity;
  }

  /** The document version this projection was read at, while nothing has changed it since. */
  readAt: string | undefined;

  constructor(schema: Schema) {
    this.schema = schema;
  }

  /** An independent copy (entities and relations are shared: they are never changed in place). */
  clone(): Projection {
    const copy = new Projection(this.schema);
    copy.copyIndexes(this);
    return copy;
  }

  /** Makes this projection's indexes copies of `from`'s. */
  protected copyIndexes(from: Projection): void {
    const copy = this as Projection;
    const source = from as Projection;
    copy.rows = new Map(source.rows);
    copy.claims = new Map(source.claims);
    copy.relationRows = new Map(source.relationRows);
    copy.claimsOfRelations = new Map(source.relationClaims);
    copy.relationsByEntity = new Map(
      [...source.byEntity].map(([entityId, ids]) => [entityId, ids instanceof Set ? new Set(ids) : ids]),
    );
    copy.identities = new Map(source.identities);
    copy.variants = new Map([...source.variants].map(([baseId, ids]) => [baseId, new Set(ids)]));
    copy.readAt = source.readAt;
  }

  /**
   * A copy that costs nothing up front: its indexes read through to this projection's, and what it
   * changes stays in its own layers (ids sets are copied on their first change). This projection
   * must not change while the overlay is in use; the overlay may (a run's session over a kept base).
   */
  overlay(): Projection {
    const layer = new Projection(this.schema);
    layer.rows = new LayeredMap(this.rows);
    layer.claims = new LayeredMap(this.claims);
    layer.relationRows = new LayeredMap(this.relationRows);
    layer.claimsOfRelations = new LayeredMap(this.relationClaims);
    layer.relationsByEntity = new LayeredMap(this.byEntity);
    layer.identities = new LayeredMap(this.identities);
    layer.variants = new LayeredMap(this.variants);
    layer.sets = new IdSetWrites(new Set());
    layer.readAt = this.readAt;
    return layer;
  }

  /**
   * Whether a lookup since the last fill was not answered whole (a projection that reads rows on
   * demand): what was answered may be wrong, and the caller fills and asks again. Never, here.
   */
  get lacking(): boolean {
    return false;
  }

  /** Told of each row a write has changed for good (after the document took it). */
  wrote(_root: "entities" | "relations", _rowId: string): void {}

  get entityCount(): number {
    this.need("whole", "");
    return this.claims.size;
  }

  /** Rows held (`entities` and `relations` rows). */
  get rowCount(): number {
    return this.rows.size + this.relationRows.size;
  }

  /**
   * Told of every lookup before it is answered; a projection holding every row has nothing to do. A
   * projection that reads rows on demand (the document server's) records what it does not hold yet.
   */
  protected need(_lookup: Lookup, _id: string, _kind?: string): void {}

  /** Whether the `entities` row (or, with `relations`, the relation row) is held; no lookup. */
  protected holds(root: "entities" | "relations", rowId: string): boolean {
    return root === "entities" ? this.rows.has(rowId) : this.relationRows.has(rowId);
  }

  /**
   * Replaces what one `entities` row projects to (`undefined` removes the row); `read`: `json` as
   * `readRow` reads it, known already. A row whose slots hold the relations they held keeps them.
   */
  setRow(rowId: string, json: unknown, read?: Omit<RowRecord, "json">): void {
    this.readAt = undefined;
    const previous = this.rows.get(rowId);
    const next = json === undefined ? undefined : (read ?? readRow(rowId, json, this.schema));
    const kept =
      previous !== undefined && next !== undefined && sameRelations(previous.relations, next.relations)
        ? previous.relations
        : undefined;
    if (previous !== undefined) {
      for (const entity of previous.entities) this.removeClaim(entity);
      if (kept === undefined) for (const relation of previous.relations) this.removeRelation(relation);
      this.rows.delete(rowId);
    }
    if (next === undefined) return;
    // A literal, not a spread of `next`: 100,000 rows held made ~25 MiB of records the spread way.
    const record: RowRecord = { entities: next.entities, relations: kept ?? next.relations, json };
    this.rows.set(rowId, record);
    for (const entity of record.entities) this.addClaim(entity);
    if (kept === undefined) for (const relation of record.relations) this.addRelation(relation);
  }

  /** Replaces one row of the `relations` map (`undefined` removes it). */
  setRelationRow(relationId: string, json: unknown): void {
    this.readAt = undefined;
    const previous = this.relationRows.get(relationId);
    if (previous !== undefined) {
      this.removeRelation(previous);
      this.relationRows.delete(relationId);
    }
    if (json === undefined) return;
    const relation = { ...readRelationRow(relationId, json), json };
    this.relationRows.set(relationId, relation);
    this.addRelation(relation);
  }

  /** A row; held, it answers its lookup (a push's checks ask each of 33,000 rows' several times). */
  row(rowId: string): RowRecord | undefined {
    const held = this.rows.get(rowId);
    if (held === undefined) this.need("row", rowId);
    return held;
  }

  /** The JSON a row was read from, or undefined when there is no such row. */
  rowJson(rowId: string): unknown {
    return this.row(rowId)?.json;
  }

  /** The JSON a relation row was read from (slot relations have none: they live in their holder's row). */
  relationJson(relationId: string): unknown {
    const held = this.relationRows.get(relationId);
    if (held === undefined) this.need("relationRow", relationId);
    return held?.json;
  }

  /** Ids of the `entities` rows read (embedded entities are in their holders' rows). */
  rowIds(): IterableIterator<string> {
    this.need("whole", "");
    return this.rows.keys();
  }

  /** Ids of the `relations` rows read (slot relations are in their holders' rows). */
  relationRowIds(): IterableIterator<string> {
    this.need("whole", "");
    return this.relationRows.keys();
  }

  /** Every row claiming `entityId`; more than one is a conflict. */
  claimsOf(entityId: string): readonly StoredEntity[] {
    this.need("entity", entityId);
    return this.claims.get(entityId) ?? [];
  }

  stored(entityId: string): StoredEntity | undefined {
    this.need("entity", entityId);
    return this.claims.get(entityId)?.[0];
  }

  storedRelation(relationId: string): StoredRelation | undefined {
    this.need("relation", relationId);
    return this.relationClaims.get(relationId)?.[0];
  }

  relationClaimsOf(relationId: string): readonly StoredRelation[] {
    this.need("relation", relationId);
    return this.relationClaims.get(relationId) ?? [];
  }

  entityIds(): IterableIterator<string> {
    this.need("whole", "");
    return this.claims.keys();
  }

  relationIds(): IterableIterator<string> {
    this.need("whole", "");
    return this.relationClaims.keys();
  }

  relationIdsOf(entityId: string): ReadonlySet<string> {
    this.need("endpoint", entityId);
    const ids = this.byEntity.get(entityId);
    return ids instanceof Set ? ids : new Set(idsIn(ids));
  }

  /** The entity as read, a copy: a variant's base applied under its own fields. */
  entity(entityId: string): Entity | undefined {
    const entity = this.sharedEntity(entityId);
    return entity === undefined ? undefined : { ...entity, payload: copyValue(entity.payload) };
  }

  /** The entity as read without copying, for checks that only look. */
  sharedEntity(entityId: string): Entity | undefined {
    const stored = this.stored(entityId);
    if (stored === undefined) return undefined;
    return {
      entityId,
      entityKind: stored.entityKind,
      payload: this.assembled(stored, new Set()),
      ...(stored.variantOf === undefined ? {} : { variantOf: stored.variantOf }),
    };
  }

  private assembled(stored: StoredEntity, seen: Set<string>): Readonly<Record<string, unknown>> {
    if (stored.variantOf === undefined || seen.has(stored.entityId)) return stored.own;
    seen.add(stored.entityId);
    const base = this.stored(stored.variantOf);
    const basePayload = base === undefined ? {} : this.assembled(base, seen);
    return { ...basePayload, ...stored.own };
  }

  *entities(entityKind?: string): Iterable<Entity> {
    this.need("whole", "");
    for (const [entityId, claims] of this.claims) {
      if (entityKind !== undefined && claims[0]?.entityKind !== entityKind) continue;
      const entity = this.sharedEntity(entityId);
      if (entity !== undefined) yield entity;
    }
  }

  /**
   * At most `count` entities (of `entityKind`, or of every kind), in the projection's order; shared,
   * not copied. A projection reading rows on demand answers them in id order.
   */
  entitiesListed(entityKind: string | undefined, count: number): Entity[] {
    const found: Entity[] = [];
    if (count <= 0) return found;
    for (const entity of this.entities(entityKind)) {
      found.push(entity);
      if (found.length >= count) break;
    }
    return found;
  }

  /** The first `count` ids in id order of the entities (of `entityKind`) after the id `after`. */
  entityIdsAfter(entityKind: string | undefined, after: string | undefined, count: number): string[] {
    const ids: string[] = [];
    for (const entityId of this.entityIds()) {
      if (after !== undefined && entityId <= after) continue;
      if (entityKind !== undefined && this.stored(entityId)?.entityKind !== entityKind) continue;
      ids.push(entityId);
    }
    if (Number.isFinite(count)) keepFirst(ids, count, compareIds);
    return ids.sort(compareIds);
  }

  /**
   * Ids in id order (after `after`, at most `count`) of the entities of `entityKind` whose number
   * field may lie in `[from, to)`: candidates the caller checks one by one. Here every entity of the
   * kind; a projection reading rows on demand asks the store's window index.
   */
  entityIdsInWindow(
    entityKind: string,
    _window: { readonly field: string; readonly from?: number | undefined; readonly to?: number | undefined },
    after: string | undefined,
    count: number,
  ): string[] {
    return this.entityIdsAfter(entityKind, after, count);
  }

  /** Every relation (of `relationKind`), in no particular order. */
  *relationsOfKind(relationKind: string | undefined): Iterable<StoredRelation> {
    for (const relationId of this.relationIds()) {
      const relation = this.storedRelation(relationId);
      if (relation === undefined) continue;
      if (relationKind !== undefined && relation.relationKind !== relationKind) continue;
      yield relation;
    }
  }

  *relations(relationKind?: string): Iterable<Relation> {
    this.need("whole", "");
    for (const claims of this.relationClaims.values()) {
      const relation = claims[0];
      if (relation === undefined || (relationKind !== undefined && relation.relationKind !== relationKind))
        continue;
      yield publicRelation(relation);
    }
  }

  relationsOf(entityId: string, relationKind?: string): Relation[] {
    return this.storedRelationsOf(entityId, relationKind).map(publicRelation);
  }

  /** Relations touching `entityId`, ordered by (kind, holder, position, id). */
  storedRelationsOf(entityId: string, relationKind?: string): StoredRelation[] {
    this.need("endpoint", entityId, relationKind);
    const result: StoredRelation[] = [];
    for (const relationId of idsIn(this.byEntity.get(entityId))) {
      const relation = this.relationClaims.get(relationId)?.[0];
      if (relation !== undefined && (relationKind === undefined || relation.relationKind === relationKind)) {
        result.push(relation);
      }
    }
    return result.sort(compareRelations);
  }

  /**
   * The first `count` of `holderId`'s ordered relations of `relationKind` (relations it holds as
   * endpoint0, not in a slot), by position then id; from `"last"`, the last `count`, last first.
   */
  orderedRelations(
    relationKind: string,
    holderId: string,
    from: "first" | "last",
    count: number,
  ): StoredRelation[] {
    const held = this.storedRelationsOf(holderId, relationKind).filter(
      (relation) => relation.endpoint0EntityId === holderId && relation.slot === undefined,
    );
    if (from === "last") held.reverse();
    return held.slice(0, count);
  }

  /** Whether more than `count` relations touch `entityId` (a hub's are not all read to tell). */
  hasMoreRelations(entityId: string, count: number): boolean {
    this.need("endpoint", entityId);
    return idCount(this.byEntity.get(entityId)) > count;
  }

  /** Ids of the entities standing for the same identity as `entity` (itself included). */
  sameIdentity(entity: StoredEntity): readonly string[] {
    const key = this.identityOf(entity);
    if (key === undefined) return [];
    this.need("identity", key);
    return this.identities.get(key) ?? [];
  }

  /** The identity an entity would have with `payload`, for `create` to find the one already there. */
  identityOf(entity: Pick<StoredEntity, "entityKind" | "own">): string | undefined {
    return identityKey(this.schema, entity);
  }

  entityIdsWithIdentity(key: string): readonly string[] {
    this.need("identity", key);
    return this.identities.get(key) ?? [];
  }

  /** Every variant built on `entityId`, directly or through other variants. */
  variantsOf(entityId: string): string[] {
    const found: string[] = [];
    const queue = [entityId];
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      this.need("variants", next);
      for (const variantId of this.variants.get(next) ?? []) {
        if (found.includes(variantId) || variantId === entityId) continue;
        found.push(variantId);
        queue.push(variantId);
      }
    }
    return found;
  }

  // The index entries below are arrays replaced, never changed (an overlay shares its base's); no
  // spread of an empty one: a row held adds two or three, 33,000 rows at a time.
  private addClaim(entity: StoredEntity): void {
    this.claims.set(entity.entityId, appended(this.claims.get(entity.entityId), entity));
    if (entity.variantOf !== undefined) {
      const siblings = this.sets.changing(this.variants, entity.variantOf);
      if (siblings === undefined) this.variants.set(entity.variantOf, this.sets.made(entity.entityId));
      else siblings.add(entity.entityId);
    }
    const key = this.identityOf(entity);
    if (key !== undefined) this.identities.set(key, appended(this.identities.get(key), entity.entityId));
  }

  private removeClaim(entity: StoredEntity): void {
    const rest = without(this.claims.get(entity.entityId), entity);
    if (rest.length === 0) this.claims.delete(entity.entityId);
    else this.claims.set(entity.entityId, rest);
    if (entity.variantOf !== undefined) {
      const siblings = this.sets.changing(this.variants, entity.variantOf);
      siblings?.delete(entity.entityId);
      if (siblings?.size === 0) this.variants.delete(entity.variantOf);
    }
    const key = this.identityOf(entity);
    if (key === undefined) return;
    const ids = [...(this.identities.get(key) ?? [])];
    const index = ids.indexOf(entity.entityId);
    if (index >= 0) ids.splice(index, 1);
    if (ids.length === 0) this.identities.delete(key);
    else this.identities.set(key, ids);
  }

  /** Indexed when the relation indexes are next read (`indexRelations`). */
  private addRelation(relation: StoredRelation): void {
    this.unindexed.push(relation);
  }

  /** Indexes the relations set since the indexes were last read, in the order they were set. */
  private indexRelations(): void {
    const pending = this.unindexed;
    this.unindexed = [];
    const claims = this.claimsOfRelations;
    const byEntity = this.relationsByEntity;
    for (const relation of pending) {
      claims.set(relation.relationId, appended(claims.get(relation.relationId), relation));
      this.sets.add(byEntity, relation.endpoint0EntityId, relation.relationId);
      this.sets.add(byEntity, relation.endpoint1EntityId, relation.relationId);
    }
  }

  private removeRelation(relation: StoredRelation): void {
    const rest = without(this.relationClaims.get(relation.relationId), relation);
    if (rest.length === 0) this.relationClaims.delete(relation.relationId);
    else this.relationClaims.set(relation.relationId, rest);
    if (rest.length > 0) return;
    this.sets.remove(this.byEntity, relation.endpoint0EntityId, relation.relationId);
    this.sets.remove(this.byEntity, relation.endpoint1EntityId, relation.relationId);
  }
}
