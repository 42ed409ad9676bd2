import { maxOrderedPage } from "../document/rows-on-demand.ts";
import { maxReadItems } from "./run-session.ts";

/**
 * The script contract: the declarations the model reads verbatim in its prompt. `script-api.ts` holds
 * the same types for the implementation; `script-contract.test.ts` fails when the two differ.
 */
export const scriptContract = `type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** As read: a variant with its base applied; a copy. */
type Entity = Readonly<{ entityId: string; entityKind: string; payload: { readonly [field: string]: Json }; variantOf?: string }>;

/** endpoint0 holds endpoint1 (a track its clips, a clip its content). */
type Relation = Readonly<{ relationId: string; relationKind: string; endpoint0EntityId: string; endpoint1EntityId: string }>;

interface FieldRange { field: string; from?: number; to?: number }

type PayloadPath = (string | number)[];

/** splice: text at path loses deleteCount code points at index and gains insert. */
type UpdateOp =
  | { op: "set"; path: PayloadPath; value: Json }
  | { op: "unset"; path: PayloadPath }
  | { op: "insert"; path: PayloadPath; value: Json }
  | { op: "remove"; path: PayloadPath }
  | { op: "splice"; path: PayloadPath; index: number; deleteCount?: number; insert?: string };

type FieldDeclaration = Readonly<{
  name: string; type: "string" | "number" | "boolean" | "null" | "text" | "list" | "record";
  nullable: boolean; optional: boolean; hostOnly: boolean; fixed: boolean; default?: Json;
  enum?: string[]; integer?: boolean; min?: number; max?: number; maxLength?: number; description?: string;
  items?: FieldDeclaration; fields?: FieldDeclaration[];
}>;

type Materialized = Readonly<{ assetId: string; content: Json }>;

declare const entities: {
  /** limit (≤ ${maxReadItems}) answers one page in entityId order; after: the previous page's last entityId. range: entities of entityKind whose number field is in [from, to). */
  list(filter?: { entityKind?: string; range?: FieldRange; limit?: number; after?: string }): Entity[];
  get(entityId: string): Entity | null;
  /** A medium whose file the document holds returns the one it has. */
  create(input: { entityKind: string; payload?: { [field: string]: Json }; variantOf?: string }): Entity;
  update(entityId: string, ops: UpdateOp[]): Entity;
  /** ≤ ${maxReadItems} updates, each entity once, as one write (all or none); returns the count. */
  updateMany(updates: { entityId: string; ops: UpdateOp[] }[]): number;
  declareFields(entityKind: string): FieldDeclaration[];
  /** Also unlinks its relations; deletes no other entity but a clip's own marker. */
  delete(entityId: string): void;
  materialize(entityId: string): Promise<Materialized>;
};

declare const relations: {
  /** By kind, holder, place; limit (≤ ${maxReadItems}) and after (the last relationId) page. */
  list(filter?: { relationKind?: string; entityId?: string; limit?: number; after?: string }): Relation[];
  /** ends (with relationKind): the first or last n ≤ ${maxOrderedPage} entityId holds, in order; a track's last clip: of(trackId, 'contain', { last: 1 })[0]. */
  of(entityId: string, relationKind?: string, ends?: { first?: number; last?: number }): Relation[];
  /** index: the place among the holder's ordered targets (default last). */
  link(input: { relationKind: string; endpoint0EntityId: string; endpoint1EntityId: string; index?: number }): Relation;
  move(relationId: string, target: { endpoint0EntityId?: string; index?: number }): Relation;
  unlink(relationId: string): void;
};

declare const console: Record<"log" | "info" | "warn" | "error" | "debug", (...values: unknown[]) => void>;
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
