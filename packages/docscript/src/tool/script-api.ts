/** The binding types the edit-script dispatcher implements; `script-contract.ts` states them for the model. */

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export interface Entity {
  readonly entityId: string;
  readonly entityKind: string;
  readonly payload: { readonly [field: string]: Json };
  readonly variantOf?: string;
}

export interface Relation {
  readonly relationId: string;
  readonly relationKind: string;
  readonly endpoint0EntityId: string;
  readonly endpoint1EntityId: string;
}

export type PayloadPath = (string | number)[];

export type UpdateOp =
  | { op: "set"; path: PayloadPath; value: Json }
  | { op: "unset"; path: PayloadPath }
  | { op: "insert"; path: PayloadPath; value: Json }
  | { op: "remove"; path: PayloadPath }
  | { op: "splice"; path: PayloadPath; index: number; deleteCount?: number; insert?: string };

export interface FieldDeclaration {
  readonly name: string;
  readonly type: "string" | "number" | "boolean" | "null" | "text" | "list" | "record";
  readonly nullable: boolean;
  readonly optional: boolean;
  readonly hostOnly: boolean;
  readonly fixed: boolean;
  readonly default?: Json;
  readonly enum?: string[];
  readonly integer?: boolean;
  readonly min?: number;
  readonly max?: number;
  readonly maxLength?: number;
  readonly description?: string;
  readonly items?: FieldDeclaration;
  readonly fields?: FieldDeclaration[];
}

export interface Materialized {
  readonly assetId: string;
  readonly content: Json;
}

/** A window on a number field: from included, to not; either may be left open. */
export interface FieldRange {
  field: string;
  from?: number;
  to?: number;
}

export interface ScriptEntities {
  list(filter?: { entityKind?: string; range?: FieldRange; limit?: number; after?: string }): Entity[];
  get(entityId: string): Entity | null;
  create(input: { entityKind: string; payload?: { [field: string]: Json }; variantOf?: string }): Entity;
  update(entityId: string, ops: UpdateOp[]): Entity;
  updateMany(updates: { entityId: string; ops: UpdateOp[] }[]): number;
  declareFields(entityKind: string): FieldDeclaration[];
  delete(entityId: string): void;
  materialize(entityId: string): Promise<Materialized>;
}

export interface ScriptRelations {
  list(filter?: { relationKind?: string; entityId?: string; limit?: number; after?: string }): Relation[];
  of(entityId: string, relationKind?: string, ends?: { first?: number; last?: number }): Relation[];
  link(input: {
    relationKind: string;
    endpoint0EntityId: string;
    endpoint1EntityId: string;
    index?: number;
  }): Relation;
  move(relationId: string, target: { endpoint0EntityId?: string; index?: number }): Relation;
  unlink(relationId: string): void;
}

export interface ScriptConsole {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
  debug(...values: unknown[]): void;
}

/** Which methods answer later: the surface the sandbox builds, typed so it cannot drift from the API. */
export const scriptSurface: {
  readonly entities: { readonly [Method in keyof ScriptEntities]: "sync" | "async" };
  readonly relations: { readonly [Method in keyof ScriptRelations]: "sync" | "async" };
} = {
  entities: {
    list: "sync",
    get: "sync",
    create: "sync",
    update: "sync",
    updateMany: "sync",
    declareFields: "sync",
    delete: "sync",
    materialize: "async",
  },
  relations: { list: "sync", of: "sync", link: "sync", move: "sync", unlink: "sync" },
};
