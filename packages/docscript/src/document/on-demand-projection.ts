/**
 * The one projection that reads rows on demand (ADR 0466, 0485), whatever the row source: a run's over
 * a large document (rows from the document server), the server's of an open document (rows from its
 * store). It holds only the rows its lookups reached, shared through `RowsOnDemand` with its overlays:
 * a kept base and the overlay each run works on hold what either looked up, except rows the run itself
 * wrote, whose state is the run's.
 */
import type { Schema } from "../schema/define-schema.ts";
import type { Entity } from "../schema/types.ts";
import type { NumberRange } from "../server/document-store.ts";
import { idCount, idsIn } from "./id-sets.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import { type Lookup, Projection } from "./projection.ts";
import { compareIds, compareRelations, type StoredRelation } from "./row-shape.ts";
import type { RowSource } from "./row-source.ts";
import {
  type DemandOptions,
  entityPageKey,
  keyOf,
  maxFollowUpIds,
  maxListedRelations,
  maxOrderedPage,
  orderedPageKey,
  RowsOnDemand,
  relationPageKey,
  speculativeLimit,
  touchingPageKey,
  type Wanted,
  windowPageKey,
} from "./rows-on-demand.ts";
import { readLimit } from "./session-context.ts";

export class OnDemandProjection extends Projection {
  readonly demand: RowsOnDemand;
  /** Rows this projection's own writes changed: the server's rows never replace them. */
  private readonly written = new Set<string>();

  constructor(schema: Schema, demand: RowsOnDemand) {
    super(schema);
    this.demand = demand;
    demand.holders.add(this);
  }

  override get lacking(): boolean {
    return this.demand.lacking;
  }

  protected override need(lookup: Lookup, id: string, kind?: string): void {
    const demand = this.demand;
    if (demand.whole) return;
    if (lookup === "whole") {
      demand.missing.set("whole", { lookup: "whole" });
      return;
    }
    // Asked for every lookup of every check: answered by id, without building a key.
    if (demand.known.hasId(lookup, id, kind)) return;
    // An id made for a row this run creates: nothing of the document has it (`identity`: not an id).
    if (lookup !== "identity" && demand.isFresh(id)) return;
    if (lookup === "endpoint" && kind !== undefined && demand.known.hasId(lookup, id)) return;
    const key = keyOf(lookup, id, kind);
    if (!demand.missing.has(key)) demand.missing.set(key, { lookup, id, kind });
  }

  /**
   * What a write's checks ask next of the lookups just answered, read in the same fill without asking
   * the call again: for an entity's relations (not a hub's: up to `speculativeLimit`), each relation's
   * claims, its ends and their variants; for an entity, its variants and the entities of its identity.
   */
  followUps(answered: readonly Wanted[]): Map<string, Wanted> {
    const demand = this.demand;
    const next = new Map<string, Wanted>();
    const want = (lookup: "entity" | "relation" | "variants" | "identity", id: string) => {
      const key = keyOf(lookup, id);
      if (next.size < maxFollowUpIds && !demand.known.hasId(lookup, id) && !demand.missing.has(key))
        next.set(key, { lookup, id });
    };
    for (const entry of answered) {
      if (entry.lookup === "endpoint" && entry.kind === undefined) {
        const relationIds = this.byEntity.get(entry.id);
        if (relationIds === undefined || idCount(relationIds) > speculativeLimit) continue;
        for (const relationId of idsIn(relationIds)) {
          want("relation", relationId);
          for (const claim of this.relationClaims.get(relationId) ?? [])
            for (const end of [claim.endpoint0EntityId, claim.endpoint1EntityId]) {
              want("entity", end);
              want("variants", end);
            }
        }
      } else if (entry.lookup === "entity") {
        want("variants", entry.id);
        for (const claim of this.claims.get(entry.id) ?? []) {
          const identity = this.identityOf(claim);
          if (identity !== undefined) want("identity", identity);
        }
      }
    }
    return next;
  }

  /** Relation rows among `written`: a page of a holder's ordered relations reads this many more. */
  private writtenRelations = 0;

  override wrote(root: "entities" | "relations", rowId: string): void {
    const key = `${root}\u0000${rowId}`;
    if (this.written.has(key)) return;
    this.written.add(key);
    if (root === RELATIONS) this.writtenRelations += 1;
  }

  /**
   * A holder's first (last) ordered relations of a kind without reading every relation it holds (a
   * track of thousands of clips): the store's first (last) `count` plus as many as this run wrote
   * relation rows, from its index of positions. Every relation the run wrote is held as the run left
   * it, and the held relations of the holder are among its relations now, so the first (last) `count`
   * of those held are the holder's: a stored one among them the run did not write is within the
   * store's first (last) `count + written`.
   */
  override orderedRelations(
    relationKind: string,
    holderId: string,
    from: "first" | "last",
    count: number,
  ): StoredRelation[] {
    const demand = this.demand;
    const most = count + this.writtenRelations;
    if (demand.whole || most > maxOrderedPage)
      return super.orderedRelations(relationKind, holderId, from, count);
    const known =
      demand.known.hasId("endpoint", holderId, relationKind) || demand.known.hasId("endpoint", holderId);
    const key = orderedPageKey(relationKind, holderId, from, most);
    if (!known && !demand.pages.has(key)) {
      if (!demand.missing.has(key))
        demand.missing.set(key, {
          lookup: "orderedPage",
          kind: relationKind,
          holder: holderId,
          from,
          count: most,
        });
      return [];
    }
    const held: StoredRelation[] = [];
    for (const relationId of idsIn(this.byEntity.get(holderId))) {
      const relation = this.relationClaims.get(relationId)?.[0];
      if (
        relation !== undefined &&
        relation.relationKind === relationKind &&
        relation.endpoint0EntityId === holderId &&
        relation.slot === undefined
      )
        held.push(relation);
    }
    held.sort(compareRelations);
    if (from === "last") held.reverse();
    return held.slice(0, count);
  }

  /**
   * The other ends of the held relations of `relationKind` touching `entityId`, in the order a script
   * reads them (`relations.of(track, "contain")`: the track's clips, first to last).
   */
  heldEnds(entityId: string, relationKind: string): string[] {
    const relations: StoredRelation[] = [];
    for (const relationId of idsIn(this.byEntity.get(entityId))) {
      const relation = this.relationClaims.get(relationId)?.[0];
      if (relation?.relationKind === relationKind) relations.push(relation);
    }
    return relations
      .sort(compareRelations)
      .map((relation) =>
        relation.endpoint0EntityId === entityId ? relation.endpoint1EntityId : relation.endpoint0EntityId,
      );
  }

  /** Whether a row claiming the entity (relation) is held, its lookup recorded as lacking or not. */
  holdsClaim(lookup: "entity" | "relation", id: string): boolean {
    return (lookup === "entity" ? this.claims : this.relationClaims).has(id);
  }

  /** A row the server answered, unless held already or written by this projection's run. */
  hold(root: "entities" | "relations", rowId: string, json: unknown): void {
    if (this.written.has(`${root}\u0000${rowId}`) || this.holds(root, rowId)) return;
    const readAt = this.readAt;
    if (root === ENTITIES) this.setRow(rowId, json);
    else this.setRelationRow(rowId, json);
    // Rows of the version it stands for: still that version.
    this.readAt = readAt;
  }

  /**
   * Whether more than `count` relations touch the entity, from a page of at most `count + 1` of them
   * (its relations read whole only when known already): a hub of thousands answers from one page.
   */
  override hasMoreRelations(entityId: string, count: number): boolean {
    const demand = this.demand;
    if (demand.whole || count + 1 > maxOrderedPage || demand.known.hasId("endpoint", entityId))
      return super.hasMoreRelations(entityId, count);
    // A page of more than `count` read already (a call's speculative page of its entity's relations).
    if ((demand.touching.get(entityId) ?? 0) > count) return true;
    const key = touchingPageKey(entityId, count + 1);
    const page = demand.pages.get(key);
    if (page === undefined) {
      demand.missing.set(key, { lookup: "touchingPage", id: entityId, count: count + 1 });
      // Not known yet (the caller fills and asks again): told "more", so it reads nothing else now.
      return true;
    }
    return !page.exhausted;
  }

  /** The overlay a run works on: a copy of what is held, filled with its base from the same server. */
  override overlay(): Projection {
    const layer = new OnDemandProjection(this.schema, this.demand);
    layer.copyIndexes(this);
    layer.readAt = this.readAt;
    return layer;
  }

  /** Stops taking the server's rows (a run's overlay, once the run has ended). */
  release(): void {
    this.demand.holders.delete(this);
  }

  override entitiesListed(entityKind: string | undefined, count: number): Entity[] {
    if (this.demand.whole) return super.entitiesListed(entityKind, count);
    return this.entityIdsAfter(entityKind, undefined, count).flatMap(
      (entityId) => this.sharedEntity(entityId) ?? [],
    );
  }

  override entityIdsAfter(
    entityKind: string | undefined,
    after: string | undefined,
    count: number,
  ): string[] {
    if (this.demand.whole) return super.entityIdsAfter(entityKind, after, count);
    if (count <= 0) return [];
    const key = entityPageKey(entityKind, after, count);
    const page = this.demand.pages.get(key);
    if (page === undefined) {
      this.demand.missing.set(key, {
        lookup: "entityPage",
        kind: entityKind,
        ...(after === undefined ? {} : { after }),
        count,
      });
      return [];
    }
    this.demand.listed(key);
    // Every stored entity of the listing up to the page's end is held, and so is every entity this run
    // created: the held ones in that range, in id order, are the listing.
    return this.heldIdsUpTo(entityKind, after, page, count);
  }

  override entityIdsInWindow(
    entityKind: string,
    window: NumberRange,
    after: string | undefined,
    count: number,
  ): string[] {
    if (this.demand.whole) return super.entityIdsInWindow(entityKind, window, after, count);
    if (count <= 0) return [];
    const key = windowPageKey(entityKind, window, after, count);
    const page = this.demand.pages.get(key);
    if (page === undefined) {
      this.demand.missing.set(key, {
        lookup: "windowPage",
        kind: entityKind,
        window: { field: window.field, from: window.from, to: window.to },
        ...(after === undefined ? {} : { after }),
        count,
      });
      return [];
    }
    this.demand.listed(key);
    // The window's stored entities up to the page's end are held, and so is every entity this run
    // created or wrote: the held ones of the kind in that range are the candidates.
    return this.heldIdsUpTo(entityKind, after, page, count);
  }

  /** The held entities (of `entityKind`) after `after` up to the page's end (all, read to the end), in id order. */
  private heldIdsUpTo(
    entityKind: string | undefined,
    after: string | undefined,
    page: { readonly end: string | undefined; readonly exhausted: boolean },
    count: number,
  ): string[] {
    const ids: string[] = [];
    for (const [entityId, claims] of this.claims) {
      if (after !== undefined && entityId <= after) continue;
      if (!page.exhausted && page.end !== undefined && entityId > page.end) continue;
      if (entityKind !== undefined && claims[0]?.entityKind !== entityKind) continue;
      ids.push(entityId);
    }
    return ids.sort(compareIds).slice(0, count);
  }

  override *relationsOfKind(relationKind: string | undefined): Iterable<StoredRelation> {
    if (this.demand.whole) {
      yield* super.relationsOfKind(relationKind);
      return;
    }
    const key = relationPageKey(relationKind);
    const page = this.demand.pages.get(key);
    if (page === undefined) {
      this.demand.missing.set(key, { lookup: "relationPage", kind: relationKind });
      return;
    }
    if (page.tooMany !== undefined)
      throw readLimit(
        `relations.list(${relationKind === undefined ? "" : JSON.stringify({ relationKind })})`,
        maxListedRelations,
        `a document read on demand lists the relations of a kind only up to ${maxListedRelations} (this one has ${page.tooMany}): read them by entity (relations.of, or relations.list({ entityId, limit, after }))`,
      );
    // Every stored relation of the kind is held, and so is every relation this run linked.
    for (const claims of this.relationClaims.values()) {
      const relation = claims[0];
      if (relation !== undefined && (relationKind === undefined || relation.relationKind === relationKind))
        yield relation;
    }
  }
}

/** A projection of `version` that reads rows from `source` on demand. */
export function onDemandProjection(
  schema: Schema,
  source: RowSource,
  version: string | undefined,
  wholeUpTo: number,
  options: DemandOptions = {},
): OnDemandProjection {
  return new OnDemandProjection(schema, new RowsOnDemand(source, version, wholeUpTo, options));
}

/** The rows a projection reads on demand, or undefined for a projection holding every row. */
export function demandOf(projection: Projection): RowsOnDemand | undefined {
  return projection instanceof OnDemandProjection ? projection.demand : undefined;
}
