import { maxReadItems } from "./run-session.ts";

/**
 * The script contract: the declarations the model reads verbatim in its prompt. `script-api.ts` holds
 * the same types for the implementation; `script-contract.test.ts` fails when the two differ.
 */
export const scriptContract = `/** A JSON value: what crosses into and out of a script. */
type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** An entity as read: a variant reads with its base applied. A copy: changing it changes nothing. */
interface Entity {
  readonly entityId: string;
  readonly entityKind: string;
  readonly payload: { readonly [field: string]: Json };
  /** The entity this one is a variant of. */
  readonly variantOf?: string;
}

/** A relation; endpoint0 is the holder (a track holds its clips, a clip its content). */
interface Relation {
  readonly relationId: string;
  readonly relationKind: string;
  readonly endpoint0EntityId: string;
  readonly endpoint1EntityId: string;
}

/** A window on a number field: from included, to not; either may be left open. */
interface FieldRange {
  field: string;
  from?: number;
  to?: number;
}

/** A payload path: field names, and list indexes (numbers). */
type PayloadPath = (string | number)[];

/**
 * One change to an entity's payload.
 * set: a field, a nested field or a list item takes value. unset: an optional field is removed.
 * insert / remove: the list item at the index ending path. splice: text at path loses deleteCount
 * code points at index and gains insert.
 */
type UpdateOp =
  | { op: "set"; path: PayloadPath; value: Json }
  | { op: "unset"; path: PayloadPath }
  | { op: "insert"; path: PayloadPath; value: Json }
  | { op: "remove"; path: PayloadPath }
  | { op: "splice"; path: PayloadPath; index: number; deleteCount?: number; insert?: string };

/** A field of an entity kind, as the schema declares it. */
interface FieldDeclaration {
  readonly name: string;
  readonly type: "string" | "number" | "boolean" | "null" | "text" | "list" | "record";
  readonly nullable: boolean;
  readonly optional: boolean;
  /** Written by the host only (storageKey, digest): a script that writes it is refused. */
  readonly hostOnly: boolean;
  /** Never changes once it holds a value. */
  readonly fixed: boolean;
  readonly default?: Json;
  readonly enum?: string[];
  readonly integer?: boolean;
  readonly min?: number;
  readonly max?: number;
  readonly maxLength?: number;
  readonly description?: string;
  /** A list's items, or a record's fields. */
  readonly items?: FieldDeclaration;
  readonly fields?: FieldDeclaration[];
}

/** A stored file's content, read through the host: assetId is the file's key. */
interface Materialized {
  readonly assetId: string;
  readonly content: Json;
}

/** The document's entities. Every write lands whole or not at all; a refused write throws at its call. */
declare const entities: {
  /**
   * Every entity, or those of one kind. limit (at most ${maxReadItems}) answers one page, in entityId order;
   * after (the last entityId of the previous page, even one deleted since) reads on from there.
   * range keeps those of entityKind whose number field is in [from, to), e.g. markers from 30 s:
   * { entityKind: 'sequence-marker', range: { field: 'startMs', from: 30000 }, limit: 5000 }.
   */
  list(filter?: { entityKind?: string; range?: FieldRange; limit?: number; after?: string }): Entity[];
  /** One entity, or null. */
  get(entityId: string): Entity | null;
  /** A new entity; a medium whose file the document already holds returns the one it has. */
  create(input: { entityKind: string; payload?: { [field: string]: Json }; variantOf?: string }): Entity;
  /** Applies the ops in order, all or none; returns the entity as it now reads. */
  update(entityId: string, ops: UpdateOp[]): Entity;
  /**
   * Many updates (at most ${maxReadItems}, each entity once) as one write, all or none: far faster than
   * update in a loop. Returns how many entities it updated.
   */
  updateMany(updates: { entityId: string; ops: UpdateOp[] }[]): number;
  /** The fields an entity kind declares. */
  declareFields(entityKind: string): FieldDeclaration[];
  /** Removes the entity and the relations touching it; never other entities, except a Clip's own SequenceMarker. */
  delete(entityId: string): void;
  /** Reads a medium's file, or the transcription file a transcript names. Writes nothing. */
  materialize(entityId: string): Promise<Materialized>;
};

/** The document's relations. */
declare const relations: {
  /**
   * Every relation, or those of one kind, or those touching one entity, in order: by kind, holder, then
   * place. limit (at most ${maxReadItems}) answers one page; after (the last relationId of the previous page,
   * even one unlinked since) reads on from there.
   */
  list(filter?: { relationKind?: string; entityId?: string; limit?: number; after?: string }): Relation[];
  /** Relations touching entityId, ordered ones in their order. */
  of(entityId: string, relationKind?: string): Relation[];
  /** Links two entities; index places it among the holder's ordered targets (default last). */
  link(input: { relationKind: string; endpoint0EntityId: string; endpoint1EntityId: string; index?: number }): Relation;
  /** Moves a relation to another holder, or to another place among its holder's targets. */
  move(relationId: string, target: { endpoint0EntityId?: string; index?: number }): Relation;
  unlink(relationId: string): void;
};

/** Lines the script logs come back as the run's logs. */
declare const console: {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
  debug(...values: unknown[]): void;
};
`;

/**
 * Every global a script sees (the sandbox's enumeration test holds the engine to it): the language's
 * own built-ins in QuickJS, whose `eval` and `Function` throw `EvalError`, and the three bindings.
 * Nothing else: no timers, no `queueMicrotask`, `WeakRef` or `FinalizationRegistry`, no typed arrays,
 * no `import()`.
 */
export const scriptGlobals: readonly string[] = [
  ..."Object Function Error EvalError RangeError ReferenceError SyntaxError TypeError URIError InternalError AggregateError Iterator Array parseInt parseFloat isNaN isFinite decodeURI decodeURIComponent encodeURI encodeURIComponent escape unescape Infinity NaN undefined Number Boolean String Math Reflect Symbol eval globalThis Date RegExp JSON Proxy Map Set WeakMap WeakSet Promise".split(
    " ",
  ),
  "entities",
  "relations",
  "console",
];
