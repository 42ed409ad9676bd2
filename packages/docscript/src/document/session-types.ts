/** The document session's contract: what `openDocument` returns and takes. */
import type { LoroDoc } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import type { CheckScope } from "./check-document.ts";
import type { Projection } from "./projection.ts";
import type { UpdateOp } from "./update-op.ts";

export interface DocumentSessionOptions {
  /** `script` (default) may not write host-only fields; `host` may. */
  readonly role?: "script" | "host";
  /** Makes ids for new entities and relations; default `<kind>-<12 random characters>`. */
  readonly createId?: (kind: string) => string;
  /**
   * A projection read earlier (`projectDocument`) to start from instead of reading the document
   * again: the session works on an overlay of it (`Projection.overlay`), so the given projection must
   * not change while the session is in use. Used only when it was read at the document's current
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
  /**
   * Answers at most this many (a page); no `read_limit` then. A page (`limit` or `after`) comes in
   * entityId order, which no write changes.
   */
  readonly limit?: number;
  /** Starts after this entity (the last one of the previous page, even one the session deleted since). */
  readonly after?: string;
  /** Refuses (`read_limit`) a read that would answer more than this many, before building it. */
  readonly atMost?: number;
  /** Only entities whose number field `field` is at least `from` and below `to`. */
  readonly range?: FieldRange;
}

/** A window on a number field: `from` included, `to` not; either may be left open. */
export interface FieldRange {
  readonly field: string;
  readonly from?: number;
  readonly to?: number;
}

export interface RelationFilter {
  readonly relationKind?: string;
  readonly entityId?: string;
  /** Answers at most this many (a page), in the relations' order; no `read_limit` then. */
  readonly limit?: number;
  /**
   * Starts after this relation (the last one of the previous page), by its place in the order. It may
   * name a relation the session unlinked or moved since a page answered it last: the read goes on from
   * where that page ended.
   */
  readonly after?: string;
  /** Refuses (`read_limit`) a read that would answer more than this many, before building it. */
  readonly atMost?: number;
}

/**
 * One end of the relations a holder holds of a kind (as endpoint0, not in a slot), in order: its first
 * `first` or its last `last` (a whole number from 1 to `maxOrderedPage`); exactly one of the two.
 */
export interface OrderedEnd {
  readonly first?: number;
  readonly last?: number;
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
    /**
     * Many updates as one write: checked together, landing whole or not at all; each entity at most
     * once. Answers how many entities it updated.
     */
    updateMany(updates: readonly { readonly entityId: string; readonly ops: readonly UpdateOp[] }[]): number;
    /** Removes the entity and every relation touching it; no other entity, except one embedded in its row. */
    delete(entityId: string): void;
  };
  readonly relations: {
    list(filter?: RelationFilter): Relation[];
    /** Relations touching `entityId`; with `ends` (and a kind), only that end of those it holds, in order. */
    of(entityId: string, relationKind?: string, ends?: OrderedEnd): Relation[];
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
