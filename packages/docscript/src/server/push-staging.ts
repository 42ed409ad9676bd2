/**
 * A change staged in a projection: the rows it touched re-read in place, the issues it adds within
 * its reach, and an undo; and the document's issues after it.
 */
import type { Frontiers, LoroDoc } from "loro-crdt";
import {
  type CheckScope,
  changeScope,
  checkDocument,
  compareIssues,
  fieldScope,
  issueKey,
} from "../document/check-document.ts";
import type { ContainerIndex } from "../document/container-index.ts";
import { projectDocument } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import { type RowRecord, readRow } from "../document/row-shape.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { type ChangedRows, changedRows } from "./changed-rows.ts";
import type { ContainerEntry, RowChange, RowRoot } from "./document-store.ts";
import { type FieldVerdict, unreadFieldWrites } from "./field-writes.ts";
import { rowValueOf } from "./row-containers.ts";

/** Rows read before a push's check (by its staged parts), and what was told of them then. */
export interface KnownRows {
  readonly entities: ReadonlyMap<string, unknown>;
  readonly relations: ReadonlyMap<string, unknown>;
  readonly kept?: { readonly entities: ReadonlySet<string>; readonly relations: ReadonlySet<string> };
  readonly verdicts?: Map<string, FieldVerdict>;
  readonly shapes?: ReadonlyMap<string, RowShape>;
}

/** An `entities` row's JSON as `readRow` read it: it holds for that very JSON only. */
export interface RowShape {
  readonly json: unknown;
  readonly read: Omit<RowRecord, "json">;
}

export function rowShapeOf(schema: Schema, rowId: string, json: unknown): RowShape {
  return { json, read: readRow(rowId, json, schema) };
}

/**
 * The rows a change touched, as `doc` holds them, read once: a push is staged again in each round of
 * its check (until the projection lacks nothing), and reading a row out of Loro is the costly part
 * (~70 µs a row at 100k entities). Plain JSON: the container index learns rows from containers'
 * parents (`rowOfContainer`), not from these reads.
 */
export class RowReads {
  private readonly doc: LoroDoc;
  private entities: Map<string, unknown> | undefined;
  private relations: Map<string, unknown> | undefined;
  /** The maps of the rows read here, when few were (`mapsReadUpTo`). */
  private readonly maps = new Map<string, ContainerEntry[]>();
  private fieldsTold:
    | { previous: ReadonlyMap<string, unknown>; fieldsOf: readonly string[] | undefined }
    | undefined;

  /**
   * Rows already read as `doc` holds them (a push's parts staged before it, ADR 0508); `kept`: those
   * patched from their stored JSON, whose maps are the ones the store holds (ADR 0514); `verdicts`:
   * what those rows wrote, told as the parts were staged (`unreadFieldWrites`).
   */
  private readonly known: KnownRows;

  constructor(doc: LoroDoc, known: KnownRows = { entities: new Map(), relations: new Map() }) {
    this.doc = doc;
    this.known = known;
  }

  /**
   * The row's maps for the store's container index (ADR 0514): `"kept"` for a row the staged parts
   * patched, its maps as read for a row read here (a push of a few rows), else not known.
   */
  containersOf(root: RowRoot, rowId: string): RowChange["containers"] {
    const kept = this.known.kept;
    if (kept !== undefined && (root === ENTITIES ? kept.entities : kept.relations).has(rowId)) return "kept";
    return this.maps.get(`${root}\u0000${rowId}`);
  }

  /** How many of the touched rows were read before the push (by its staged parts), not by it. */
  get readBefore(): number {
    let count = 0;
    for (const [rows, known] of [
      [this.entities, this.known.entities],
      [this.relations, this.known.relations],
    ] as const)
      for (const rowId of rows?.keys() ?? []) if (known.has(rowId)) count++;
    return count;
  }

  /** The touched `entities` rows as the document holds them. */
  entityRows(rows: ChangedRows): ReadonlyMap<string, unknown> {
    this.entities ??= readRows(this.doc, ENTITIES, rows.entities, this.known.entities, this.maps);
    return this.entities;
  }

  /** Sets the touched rows in `projection` as the document holds them. */
  apply(projection: Projection, rows: ChangedRows): void {
    this.entities ??= readRows(this.doc, ENTITIES, rows.entities, this.known.entities, this.maps);
    this.relations ??= readRows(this.doc, RELATIONS, rows.relations, this.known.relations, this.maps);
    const shapes = this.known.shapes;
    for (const [rowId, json] of this.entities) {
      const shape = shapes?.get(rowId);
      projection.setRow(rowId, json, shape !== undefined && shape.json === json ? shape.read : undefined);
    }
    for (const [relationId, json] of this.relations) projection.setRelationRow(relationId, json);
  }

  /**
   * The entities whose fields alone the change wrote (`unreadFieldWrites`), told once for the rows as
   * they were: asked again (the look-ahead, then the check) with the same rows, it is not read again.
   */
  fieldWrites(
    projection: Projection,
    rows: ChangedRows,
    previous: ReadonlyMap<string, unknown>,
  ): readonly string[] | undefined {
    const told = this.fieldsTold;
    if (told !== undefined && sameRows(told.previous, previous)) return told.fieldsOf;
    const fieldsOf = unreadFieldWrites(
      projection.schema,
      previous,
      this.entityRows(rows),
      this.known.verdicts,
    );
    this.fieldsTold = { previous, fieldsOf };
    return fieldsOf;
  }
}

/** Whether two reads of the rows as they were hold the very same rows (the projection's own values). */
function sameRows(left: ReadonlyMap<string, unknown>, right: ReadonlyMap<string, unknown>): boolean {
  if (left.size !== right.size) return false;
  for (const [rowId, json] of right) if (left.get(rowId) !== json || !left.has(rowId)) return false;
  return true;
}

/**
 * Records in `projection` what staging the change looks up before its check: the rows as they were,
 * and what the check reaches (`changeScope`, or `fieldScope` for a change of fields alone). True when
 * the projection lacks some of it: the caller fills it and asks again, and judges the push once it
 * lacks nothing, instead of judging it once per level of lookups and throwing each judgement away.
 */
export function scopeLacking(projection: Projection, rows: ChangedRows, reads: RowReads): boolean {
  const previous = new Map([...rows.entities].map((rowId) => [rowId, projection.rowJson(rowId)]));
  for (const relationId of rows.relations) projection.relationJson(relationId);
  if (projection.lacking) return true;
  const entitiesOnly = rows.relations.size === 0 && rows.foreignRoots.size === 0;
  const fieldsOf = entitiesOnly ? reads.fieldWrites(projection, rows, previous) : undefined;
  if (fieldsOf === undefined) changeScope(projection, rows);
  else fieldScope(projection, fieldsOf);
  return projection.lacking;
}

/**
 * Rows read out of Loro up to which their maps are read too, for the store's container index (ADR
 * 0514): a push of a few rows keeps its rows indexed; a large one (each row's maps walked again,
 * ~+50%) leaves them to be read whole next time.
 */
const mapsReadUpTo = 512;

function readRows(
  doc: LoroDoc,
  root: RowRoot,
  rowIds: ReadonlySet<string>,
  known: ReadonlyMap<string, unknown>,
  maps: Map<string, ContainerEntry[]>,
): Map<string, unknown> {
  const map = doc.getMap(root);
  const read = new Map<string, unknown>();
  const withMaps = rowIds.size <= mapsReadUpTo;
  for (const rowId of rowIds) {
    if (known.has(rowId)) {
      read.set(rowId, known.get(rowId));
      continue;
    }
    read.set(
      rowId,
      rowValueOf(map, rowId, withMaps ? (entries) => maps.set(`${root}\u0000${rowId}`, entries) : undefined),
    );
  }
  return read;
}

/**
 * Why a change writing root containers outside the mapping is refused, one reason each: a push's
 * (`stageChange`) and a created document's snapshot's (`checkedSnapshot`, ADR 0553) alike.
 */
export function foreignRootReasons(foreignRoots: Iterable<string>): string[] {
  return [...foreignRoots].map(
    (root) => `the update writes root container "${root}", which the mapping does not know`,
  );
}

/**
 * Re-reads the rows a change touched into `projection` (in place) and returns the issues the change
 * adds within its reach, with an `undo` that restores the rows as they were. When the projection
 * lacks rows the check before the change looked up, it stops there (nothing staged, `lacking`): the
 * caller fills them and stages again, and `reads` (kept across those rounds) reads each row once.
 */
export function stageChange(
  projection: Projection,
  doc: LoroDoc,
  rows: ChangedRows,
  reads: RowReads = new RowReads(doc),
): {
  added: DocumentIssue[];
  foreign: string[];
  undo: () => void;
  /** The rows as they were before the change. */
  previous: ReadonlyMap<string, unknown>;
  /** Those rows as the projection read them. */
  previousRead: ReadonlyMap<string, RowRecord | undefined>;
  previousRelations: ReadonlyMap<string, unknown>;
  /** The rows the change touched. */
  rows: { readonly entities: ReadonlySet<string>; readonly relations: ReadonlySet<string> };
  /** Those rows as they were. */
  before: { root: RowRoot; rowId: string; json: unknown }[];
  /** What the change reaches, and every issue there after it. */
  scope: CheckScope;
  after: DocumentIssue[];
  /** Set when the change wrote entities' fields alone, none an invariant reads: those entities. */
  fieldsOf?: readonly string[];
} {
  const foreign = foreignRootReasons(rows.foreignRoots);
  const previousRows = new Map([...rows.entities].map((rowId) => [rowId, projection.rowJson(rowId)]));
  // As the projection read them: their members, stored with the change, are not read again.
  const previousRead = new Map([...rows.entities].map((rowId) => [rowId, projection.row(rowId)]));
  const previousRelations = new Map(
    [...rows.relations].map((relationId) => [relationId, projection.relationJson(relationId)]),
  );
  const lacking = () => ({
    added: [],
    foreign,
    undo: () => {},
    previous: previousRows,
    previousRead,
    previousRelations,
    rows,
    before: [],
    scope: { entityIds: new Set<string>(), relationIds: new Set<string>() },
    after: [],
  });
  // A change of entities' rows alone may be of fields alone: told once the rows as they were are held.
  const entitiesOnly = rows.relations.size === 0 && rows.foreignRoots.size === 0;
  if (entitiesOnly && projection.lacking) return lacking();
  // A change of fields no invariant reads reaches those entities only, as a run's does (ADR 0487).
  const fieldsOf = entitiesOnly ? reads.fieldWrites(projection, rows, previousRows) : undefined;
  const scopeOf = () =>
    fieldsOf === undefined ? changeScope(projection, rows) : fieldScope(projection, fieldsOf);
  const beforeScope = scopeOf();
  const before = new Set(checkDocument(projection, beforeScope).map(issueKey));
  // Judged again once filled: staging the change now would be thrown away.
  if (projection.lacking) return lacking();
  reads.apply(projection, rows);
  const afterScope = scopeOf();
  const scope: CheckScope = {
    entityIds: new Set([...beforeScope.entityIds, ...afterScope.entityIds]),
    relationIds: new Set([...beforeScope.relationIds, ...afterScope.relationIds]),
  };
  const after = checkDocument(projection, scope);
  const added = after.filter((issue) => !before.has(issueKey(issue)));
  const undo = () => {
    for (const [rowId, json] of previousRows) projection.setRow(rowId, json);
    for (const [relationId, json] of previousRelations) projection.setRelationRow(relationId, json);
  };
  return {
    added,
    foreign,
    undo,
    previous: previousRows,
    previousRead,
    previousRelations,
    rows,
    before: [
      ...[...previousRows].map(([rowId, json]) => ({ root: ENTITIES as RowRoot, rowId, json })),
      ...[...previousRelations].map(([rowId, json]) => ({ root: RELATIONS as RowRoot, rowId, json })),
    ],
    scope,
    after,
    ...(fieldsOf === undefined ? {} : { fieldsOf }),
  };
}

export type Staged = ReturnType<typeof stageChange>;

/** The issues the update adds to the version it was made on (the slow path: a full read of that version). */
export function issuesOnItsOwn(
  schema: Schema,
  doc: LoroDoc,
  startFrontiers: Frontiers,
  bytes: Uint8Array,
): DocumentIssue[] {
  const base = doc.forkAt(startFrontiers);
  const index: ContainerIndex = new Map();
  const projection = projectDocument(base, schema, index);
  const from = base.frontiers();
  base.import(bytes);
  return stageChange(projection, base, changedRows(base, from, base.frontiers(), index)).added;
}

export /**
 * The document's issues after a change: those outside what it reached, kept, and every issue within
 * it, checked again (deduplicated, in the check's order).
 */
function nextIssues(
  issues: readonly DocumentIssue[],
  scope: CheckScope,
  within: readonly DocumentIssue[],
): DocumentIssue[] {
  const entityIds = new Set(scope.entityIds);
  const relationIds = new Set(scope.relationIds);
  const kept = issues.filter(
    (issue) =>
      !(issue.entityId !== undefined && entityIds.has(issue.entityId)) &&
      !(issue.relationId !== undefined && relationIds.has(issue.relationId)),
  );
  const seen = new Set<string>();
  return [...kept, ...within]
    .filter((issue) => {
      const key = issueKey(issue);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort(compareIssues);
}
