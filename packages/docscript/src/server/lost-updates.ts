/**
 * The lost-update rule (ADR 0475), read off the document's history: a push whose base lacks a committed
 * change it would overwrite (the same field or text), orphan (a row deleted since) or undo (a delete of a
 * row changed since) is conflicted, whichever order the two arrived in and whatever their peer ids.
 */
import { type ContainerID, type IdSpan, type LoroDoc, LoroList, LoroMap, LoroText } from "loro-crdt";
import type { ContainerIndex } from "../document/container-index.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { rowOfContainer } from "./changed-rows.ts";
import type { ConflictReason } from "./push-checks.ts";

/** One write target: a map key, or a whole text or list (its edits), inside one row. */
interface Target {
  readonly container: string;
  /** The map key written; undefined for a text or list edit. */
  readonly key: string | undefined;
  readonly root: string;
  readonly rowId: string;
}

/** What a run of changes wrote, by target and by row. */
interface Writes {
  /** By `container\0key` (a map key) or `container` (a text or list). */
  readonly targets: Map<string, Target>;
  /** Rows written inside, or set, by `root/rowId`. */
  readonly touched: Map<string, { readonly root: string; readonly rowId: string }>;
  /** Rows deleted from their root map, by `root/rowId`. */
  readonly deleted: Map<string, { readonly root: string; readonly rowId: string }>;
  /** Rows set in their root map (created), by `root/rowId`. */
  readonly created: Set<string>;
}

const rootPattern = /^cid:root-(.+):\w+$/;

/** The writes of the changes in `spans` (all in `doc`), each placed in its row. */
export function writesOf(doc: LoroDoc, spans: readonly IdSpan[], index: ContainerIndex): Writes {
  const writes: Writes = { targets: new Map(), touched: new Map(), deleted: new Map(), created: new Set() };
  for (const span of spans) {
    for (const change of doc.exportJsonInIdSpan(span)) {
      for (const op of change.ops) {
        const content = op.content as { type?: string; key?: unknown };
        const key = typeof content.key === "string" ? content.key : undefined;
        const root = rootPattern.exec(op.container)?.[1];
        if (root !== undefined) {
          if ((root !== ENTITIES && root !== RELATIONS) || key === undefined) continue;
          const rowKey = `${root}/${key}`;
          if (content.type === "delete") writes.deleted.set(rowKey, { root, rowId: key });
          else {
            writes.created.add(rowKey);
            writes.touched.set(rowKey, { root, rowId: key });
          }
          continue;
        }
        const row = rowOfContainer(doc, op.container, index);
        if (row === undefined || (row.root !== ENTITIES && row.root !== RELATIONS)) continue;
        const target = { container: op.container, key, root: row.root, rowId: row.rowId };
        writes.targets.set(key === undefined ? op.container : `${op.container}\u0000${key}`, target);
        writes.touched.set(`${row.root}/${row.rowId}`, row);
      }
    }
  }
  return writes;
}

/** The field a target writes, as a reader names it: the map key, or the key its text or list sits under. */
function fieldOf(doc: LoroDoc, target: Target): string | undefined {
  if (target.key !== undefined) return target.key;
  const match = /^cid:(\d+)@(\d+):/.exec(target.container);
  if (match === null) return undefined;
  const counter = Number(match[1]);
  const op = doc
    .exportJsonInIdSpan({ peer: match[2] as `${number}`, counter, length: 1 })
    .flatMap((change) => change.ops)
    .find((candidate) => candidate.counter === counter);
  const key = (op?.content as { key?: unknown } | undefined)?.key;
  return typeof key === "string" ? key : undefined;
}

function idOf(root: string, rowId: string): { entityId: string } | { relationId: string } {
  return root === ENTITIES ? { entityId: rowId } : { relationId: rowId };
}

function named(root: string, rowId: string): string {
  return root === ENTITIES ? rowId : `relation ${rowId}`;
}

/**
 * The writes of a push (`pushed`, its spans in `doc`) that lose a committed change its base lacks
 * (`concurrent`: the changes the server held that the push's base did not): one reason per row and field.
 */
export function lostUpdates(
  doc: LoroDoc,
  pushed: readonly IdSpan[],
  concurrent: readonly IdSpan[],
  index: ContainerIndex,
): ConflictReason[] {
  if (concurrent.length === 0) return [];
  const theirs = writesOf(doc, concurrent, index);
  const ours = writesOf(doc, pushed, index);
  const reasons = new Map<string, ConflictReason>();
  const add = (key: string, reason: ConflictReason) => {
    if (!reasons.has(key)) reasons.set(key, reason);
  };
  // A row the push writes into that another client deleted (unless the push deletes it too).
  for (const [rowKey, row] of ours.touched) {
    if (!theirs.deleted.has(rowKey) || ours.deleted.has(rowKey)) continue;
    add(rowKey, {
      reason: row.root === ENTITIES ? "entity_deleted" : "relation_deleted",
      ...idOf(row.root, row.rowId),
      message: `another client deleted ${named(row.root, row.rowId)} after the version this plan read; the plan's writes to it do not apply`,
    });
  }
  // A row the push deletes that another client changed or created: the delete would undo that change.
  for (const [rowKey, row] of ours.deleted) {
    if (!theirs.touched.has(rowKey) || theirs.deleted.has(rowKey)) continue;
    add(rowKey, {
      reason: row.root === ENTITIES ? "entity_changed" : "relation_changed",
      ...idOf(row.root, row.rowId),
      message: `the plan deletes ${named(row.root, row.rowId)}, which another client changed (or moved) after the version this plan read`,
    });
  }
  // A row both created under one id.
  for (const rowKey of ours.created) {
    if (!theirs.created.has(rowKey)) continue;
    const row = ours.touched.get(rowKey)!;
    add(rowKey, {
      reason: row.root === ENTITIES ? "entity_changed" : "relation_changed",
      ...idOf(row.root, row.rowId),
      message: `another client created ${named(row.root, row.rowId)} too, after the version this plan read`,
    });
  }
  // The same field (a map key, or a text or list edited by both).
  for (const [targetKey, target] of ours.targets) {
    if (!theirs.targets.has(targetKey)) continue;
    const rowKey = `${target.root}/${target.rowId}`;
    if (reasons.has(rowKey) || ours.deleted.has(rowKey) || theirs.deleted.has(rowKey)) continue;
    const field = fieldOf(doc, target);
    add(`${rowKey}/${targetKey}`, {
      reason: "field_changed",
      ...idOf(target.root, target.rowId),
      ...(field === undefined ? {} : { field }),
      message: `another client changed ${field === undefined ? "a field" : `"${field}"`} of ${named(target.root, target.rowId)} after the version this plan read; the plan's write would overwrite it`,
    });
  }
  return [...reasons.values()];
}

/** The targets of the push's writes a field conflict names, for `apply_remaining` to put back. */
export function conflictingTargets(
  doc: LoroDoc,
  pushed: readonly IdSpan[],
  concurrent: readonly IdSpan[],
  index: ContainerIndex,
): Target[] {
  const theirs = writesOf(doc, concurrent, index);
  const ours = writesOf(doc, pushed, index);
  return [...ours.targets]
    .filter(([targetKey, target]) => {
      const rowKey = `${target.root}/${target.rowId}`;
      return theirs.targets.has(targetKey) && !theirs.deleted.has(rowKey) && !ours.deleted.has(rowKey);
    })
    .map(([, target]) => target);
}

/**
 * Puts back, in `fork` (the push merged in), the committed value of each target (as `committed`, the
 * server's document before the push, holds it): what `apply_remaining` leaves out of a push. False when
 * a value cannot be put back in place (a container replaced by another), and nothing is written then.
 */
export function restoreCommitted(fork: LoroDoc, committed: LoroDoc, targets: readonly Target[]): boolean {
  const writes: (() => void)[] = [];
  for (const target of targets) {
    const theirs = committed.getContainerById(target.container as ContainerID);
    const mine = fork.getContainerById(target.container as ContainerID);
    if (target.key !== undefined) {
      if (!(theirs instanceof LoroMap) || !(mine instanceof LoroMap)) return false;
      const value = theirs.get(target.key) as unknown;
      if (isContainer(value)) return false;
      const key = target.key;
      writes.push(() => (value === undefined ? mine.delete(key) : mine.set(key, value as never)));
      continue;
    }
    if (theirs instanceof LoroText && mine instanceof LoroText) {
      const text = theirs.toString();
      writes.push(() => mine.update(text));
      continue;
    }
    if (theirs instanceof LoroList && mine instanceof LoroList) {
      const items = theirs.toArray() as unknown[];
      if (items.some(isContainer)) return false;
      writes.push(() => {
        if (mine.length > 0) mine.delete(0, mine.length);
        for (const item of items) mine.push(item as never);
      });
      continue;
    }
    return false;
  }
  for (const write of writes) write();
  return true;
}

function isContainer(value: unknown): boolean {
  return (
    value instanceof LoroMap ||
    value instanceof LoroList ||
    value instanceof LoroText ||
    isLoroContainer(value)
  );
}

function isLoroContainer(value: unknown): boolean {
  return (
    typeof value === "object" && value !== null && typeof (value as { kind?: unknown }).kind === "function"
  );
}
