/**
 * The one way a session's write lands: staged in the projection, checked within its reach, refused
 * (the staging undone) when it adds an issue, else applied to Loro whole or not at all.
 */

import { type LoroDoc, LoroMap, type OpId } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import {
  type CheckOptions,
  type CheckScope,
  changeScope,
  checkDocument,
  fieldScope,
  isDeferred,
  issueKey,
} from "./check-document.ts";
import { refreshRows } from "./interpret.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import { keepLoroHeadroom } from "./loro-memory.ts";
import { type Projection, RowsNeeded } from "./projection.ts";
import type { RowRecord } from "./row-shape.ts";

export type RowChanges = { entities: Map<string, unknown>; relations: Map<string, unknown> };

/** The union of every landed write's scope (the after scope already holds the before scope). */
export interface ChangedScope {
  readonly entityIds: Set<string>;
  readonly relationIds: Set<string>;
  /**
   * Rows written by writes of fields alone that an invariant may read (ADR 0483): checked within
   * those entities' reach when written; what a whole change of them reaches (invariants read an
   * entity's neighbours) is added at the end. A write of fields no invariant reads is not here.
   */
  readonly fieldRows: Set<string>;
  /**
   * The entities of `entityIds` whose invariants the run's end checks: all but those every write
   * reaching them left their invariants' answers as they were (`land`'s `invariantsKept`).
   */
  readonly invariantEntityIds: Set<string>;
}

/**
 * Scope of a change: the rows' entities and relations, then everything touching them. A write of
 * entities' fields alone (`fieldsOf`: their rows change in those fields only) reaches no relation:
 * endpoints, slots and cardinality do not depend on a field's value; its scope is those entities,
 * their variants (which take the fields) and the entities of their identity.
 */
function scopeOf(
  projection: Projection,
  changes: RowChanges,
  extraEntities: Iterable<string>,
  fieldsOf: readonly string[] | undefined,
): { entityIds: Set<string>; relationIds: Set<string> } {
  if (fieldsOf === undefined)
    return changeScope(
      projection,
      { entities: changes.entities.keys(), relations: changes.relations.keys() },
      extraEntities,
    );
  return fieldScope(projection, fieldsOf);
}

/** A scope whose invariants are checked for all its entities but `kept`. */
function withKept(
  scope: { entityIds: Set<string>; relationIds: Set<string> },
  kept: ReadonlySet<string>,
): { entityIds: Set<string>; relationIds: Set<string>; invariantEntityIds: Set<string> } {
  const invariantEntityIds = new Set(scope.entityIds);
  for (const entityId of kept) invariantEntityIds.delete(entityId);
  return { ...scope, invariantEntityIds };
}

/** The issues a check of `scope` finds, deferred ones left out, by key. */
function issueKeys(projection: Projection, scope: CheckScope, options: CheckOptions): Set<string> {
  return new Set(
    checkDocument(projection, scope, options)
      .filter((issue) => !isDeferred(issue))
      .map(issueKey),
  );
}

/**
 * The version just before the last `written` atoms of `doc`, which this peer committed last (ADR
 * 0481): the dependencies of their change when they start one, else this peer's op before them (Loro
 * merged them into the change of this peer's previous writes, which they follow).
 */
function versionBefore(doc: LoroDoc, written: number): OpId[] {
  const now = doc.frontiers();
  const own = now.length === 1 ? now[0] : undefined;
  if (own === undefined || own.peer !== doc.peerIdStr)
    throw new Error("the document's version after a write is not the writer's own op");
  const first = own.counter - written + 1;
  const change = doc.getChangeAt({ peer: own.peer, counter: first });
  return change.counter === first ? change.deps : [{ peer: own.peer, counter: first - 1 }];
}

/**
 * The atoms of a session's writes left pending before the next write commits them (ADR 0499). Loro
 * reads (values, versions) see pending atoms, and an export or a fork commits them first.
 */
const COMMIT_AFTER_ATOMS = 1000;

/**
 * Runs `mutate` on the document, whole or not at all: Loro has no rollback of a transaction, so a
 * mutation that throws part-way is committed with the writes pending before it and reverted to the
 * version before its own atoms (and `restore` undoes the staging). That version is read off the
 * history only then (ADR 0493), not read before every write. The writes before this one are
 * committed once they hold `COMMIT_AFTER_ATOMS` (ADR 0499): a commit per write cost a tenth of a
 * build's CPU, a pending transaction of a whole build more in collections than the commits.
 */
function mutateWhole(doc: LoroDoc, mutate: () => void, restore: () => void): void {
  let pendingBefore = doc.getPendingTxnLength();
  if (pendingBefore >= COMMIT_AFTER_ATOMS) {
    doc.commit();
    pendingBefore = 0;
  }
  try {
    keepLoroHeadroom();
    mutate();
  } catch (error) {
    const written = doc.getPendingTxnLength() - pendingBefore;
    doc.commit();
    if (written > 0) {
      doc.revertTo(versionBefore(doc, written));
      doc.commit();
    }
    restore();
    throw new DocScriptError(
      "invalid_operation",
      `the write could not be stored, and nothing of it landed: ${error instanceof Error ? error.message : String(error)}`.slice(
        0,
        500,
      ),
    );
  }
}

export interface LandParts {
  readonly doc: LoroDoc;
  readonly projection: Projection;
  readonly rowJson: (rowId: string) => Record<string, unknown> | undefined;
  readonly changed: ChangedScope;
  /** Called when a landed write changed relations: kept order keys may be stale. */
  readonly relationsWritten: () => void;
}

export function sessionLand({ doc, projection, rowJson, changed, relationsWritten }: LandParts) {
  const relationsMap = doc.getMap(RELATIONS);
  /** Puts the changed rows in the projection; answers how to put back what they replaced. */
  const stage = (
    changes: RowChanges,
    read: ReadonlyMap<string, Omit<RowRecord, "json"> | undefined> | undefined,
  ): (() => void) => {
    const previous: RowChanges = { entities: new Map(), relations: new Map() };
    for (const [rowId, json] of changes.entities) {
      previous.entities.set(rowId, projection.row(rowId) === undefined ? undefined : rowJson(rowId));
      projection.setRow(rowId, json, read?.get(rowId));
    }
    for (const [relationId, json] of changes.relations) {
      const stored = relationsMap.get(relationId) as unknown;
      previous.relations.set(relationId, stored instanceof LoroMap ? stored.toJSON() : undefined);
      projection.setRelationRow(relationId, json);
    }
    return () => {
      for (const [rowId, json] of previous.entities) projection.setRow(rowId, json);
      for (const [relationId, json] of previous.relations) projection.setRelationRow(relationId, json);
    };
  };
  /**
   * Lands one write: stage the rows it will produce in the projection, check what it touched, refuse
   * (undoing the staging) when it adds an issue, else mutate the document and re-read the rows.
   */
  const land = (
    changes: RowChanges,
    mutate: () => void,
    extraEntities: Iterable<string> = [],
    /**
     * The staged rows are exactly what `mutate` leaves (an update's fields, computed by the same ops; a
     * new row whose fields are a `storedCopy`): they stay, and the rows are not read back out of the
     * document. `fieldsOf`: the write changes only these entities' fields, and is checked within their
     * reach alone; `reached`: the rows of those whose written fields an invariant reads, whose full
     * reach the run's end checks (ADR 0483); `read`: rows known as `readRow` will read them (a write
     * of fields: the entities written, the rest as held), not read again; undefined, a row read again.
     */
    exact:
      | false
      | {
          readonly fieldsOf?: readonly string[];
          readonly reached?: ReadonlySet<string>;
          readonly read?: ReadonlyMap<string, Omit<RowRecord, "json"> | undefined>;
        } = false,
    /**
     * Entities of the scope whose invariants' answers the write cannot change (a relation moved
     * among its holder's others leaves the view of its target as it was): checked without them.
     */
    invariantsKept: ReadonlySet<string> = new Set(),
  ): void => {
    const fieldsOf = exact === false ? undefined : exact.fieldsOf;
    // Fields alone, none an invariant reads: no invariant's answer changes, so none is asked (a clip's
    // invariant reads its content's kind: one more lookup per clip whose volume is set).
    const options: CheckOptions = {
      invariants: !(exact !== false && fieldsOf !== undefined && (exact.reached?.size ?? 0) === 0),
    };
    const beforeScope = withKept(scopeOf(projection, changes, extraEntities, fieldsOf), invariantsKept);
    // A projection reading rows on demand that lacks part of the scope: checking it now would check a
    // part and ask for the rest one level at a time; its reader fills the scope (with what its checks
    // ask next) and the write runs again (ADR 0466).
    if (projection.lacking) throw new RowsNeeded();
    // What the before scope held stays checked, without widening it to its neighbours' relations (a
    // clip's track holds thousands): that is the server's scope too, and it keeps a write's check local.
    const read = exact === false ? undefined : exact.read;
    let restore = stage(changes, read);
    let afterScope: ReturnType<typeof withKept>;
    let found: DocumentIssue[];
    try {
      afterScope = withKept(scopeOf(projection, changes, extraEntities, fieldsOf), invariantsKept);
      for (const entityId of beforeScope.entityIds) afterScope.entityIds.add(entityId);
      for (const relationId of beforeScope.relationIds) afterScope.relationIds.add(relationId);
      for (const entityId of beforeScope.invariantEntityIds) afterScope.invariantEntityIds.add(entityId);
      found = checkDocument(projection, afterScope, options).filter((issue) => !isDeferred(issue));
    } catch (error) {
      // A check that throws (an invariant's own bug, say) leaves nothing staged either.
      restore();
      throw error;
    }
    // A projection reading rows on demand that lacked some: the checks' answer may be wrong, so the
    // write does not land; the caller fills what was lacking and writes again (ADR 0466).
    if (projection.lacking) {
      restore();
      throw new RowsNeeded();
    }
    if (found.length > 0) {
      // Only an issue the write added refuses it: the issues the document had before, in the same
      // scope, are read with the staging undone. A write after which its scope has no issue (the
      // most of them) has nothing to tell apart, and that check is not made.
      restore();
      const before = issueKeys(projection, beforeScope, options);
      if (projection.lacking) throw new RowsNeeded();
      const added = found.filter((issue) => !before.has(issueKey(issue)));
      if (added.length > 0) throw DocScriptError.fromIssues("schema_violation", added);
      restore = stage(changes, read);
    }
    mutateWhole(doc, mutate, restore);
    if (exact === false)
      refreshRows(projection, doc, {
        entities: changes.entities.keys(),
        relations: changes.relations.keys(),
      });
    for (const rowId of changes.entities.keys()) projection.wrote(ENTITIES, rowId);
    for (const relationId of changes.relations.keys()) projection.wrote(RELATIONS, relationId);
    if (changes.relations.size > 0) relationsWritten();
    if (exact !== false) for (const rowId of exact.reached ?? []) changed.fieldRows.add(rowId);
    for (const entityId of afterScope.entityIds) changed.entityIds.add(entityId);
    for (const entityId of afterScope.invariantEntityIds) changed.invariantEntityIds.add(entityId);
    for (const relationId of afterScope.relationIds) changed.relationIds.add(relationId);
  };
  return land;
}
