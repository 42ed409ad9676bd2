/**
 * Which `entities` and `relations` rows a change touched, read off the change's own ops (never a diff of
 * the whole document): an op on a root map names the row by its key; an op on a nested container is
 * found in the container index, or through the op of this change that created the container.
 */
import type {
  Container,
  ContainerID,
  Frontiers,
  IdSpan,
  ImportBlobMetadata,
  JsonChange,
  LoroDoc,
} from "loro-crdt";
import type { ContainerIndex } from "../document/container-index.ts";
import { ENTITIES, META, RELATIONS } from "../document/layout.ts";

export interface ChangedRows {
  readonly entities: Set<string>;
  readonly relations: Set<string>;
  /** Root containers outside the mapping: a push that writes one breaks the schema. */
  readonly foreignRoots: Set<string>;
}

/** Loro's JSON form of a value that is a container (`🦜:cid`): never a plain value. */
export const containerValuePrefix = "🦜:";
const rootPattern = /^cid:root-(.+):\w+$/;

/**
 * Row keys read off their maps' creating ops per document before its paths are built instead.
 * Loro builds a document's paths on first use by decoding its root maps whole (0.4–0.8 s of CPU at
 * 100k entities, on every replica freshly made from a snapshot), after which a path costs ~40 µs; a
 * creating op costs ~1–4 ms (a block of history decoded). A few rows (the first commit after open)
 * are found by their ops, many (the shift's 33,000) by paths.
 */
const rowKeysByOps = 64;
/** Documents whose paths Loro has built (or that are to use them): a path is then the cheaper. */
const pathsBuilt = new WeakSet<LoroDoc>();
/** How many row keys each document had read off creating ops. */
const keysReadByOps = new WeakMap<LoroDoc, number>();

/** The rows the changes between two versions of `doc` touched. */
export function changedRows(
  doc: LoroDoc,
  from: Frontiers,
  to: Frontiers,
  index: ContainerIndex = new Map(),
): ChangedRows {
  return rowsOfSpans(doc, doc.findIdSpansBetween(from, to).forward, index);
}

/** The op spans an update blob carries, from its decoded metadata. */
export function spansOfUpdate(meta: ImportBlobMetadata): IdSpan[] {
  const start = meta.partialStartVersionVector.toJSON();
  const spans: IdSpan[] = [];
  for (const [peer, end] of meta.partialEndVersionVector.toJSON()) {
    const counter = start.get(peer) ?? 0;
    if (end > counter) spans.push({ peer, counter, length: end - counter });
  }
  return spans;
}

/** The rows the ops in `spans` (already in `doc`; `read`: their changes, when already read) touched. */
export function rowsOfSpans(
  doc: LoroDoc,
  spans: readonly IdSpan[],
  index: ContainerIndex = new Map(),
  read?: readonly JsonChange[],
): ChangedRows {
  const changes: ChangedRows = { entities: new Set(), relations: new Set(), foreignRoots: new Set() };
  const ops = (read ?? spans.flatMap((span) => doc.exportJsonInIdSpan(span))).flatMap((change) => change.ops);
  // Many containers to find: their rows' keys by Loro's paths (built once for the document).
  if (new Set(ops.map((op) => op.container)).size > rowKeysByOps) pathsBuilt.add(doc);
  // Containers this change created, by the op that put them in their parent.
  const created = new Map<string, { parent: string; key: string | undefined }>();
  for (const op of ops) {
    const content = op.content as { value?: unknown; key?: unknown };
    if (typeof content.value === "string" && content.value.startsWith(containerValuePrefix)) {
      created.set(content.value.slice(containerValuePrefix.length), {
        parent: op.container,
        key: typeof content.key === "string" ? content.key : undefined,
      });
    }
  }
  const rowOf = (
    containerId: string,
    key: string | undefined,
    depth = 0,
  ): { root: string; rowId: string | undefined } | undefined => {
    const root = rootPattern.exec(containerId)?.[1];
    if (root !== undefined) return { root, rowId: key };
    const known = index.get(containerId);
    if (known !== undefined) return known;
    const parent = created.get(containerId);
    if (parent !== undefined && depth < 64) return rowOf(parent.parent, parent.key, depth + 1);
    // Not in the index and not made here: the op that created it says where (also for a deleted row).
    const byHistory = rowOfContainer(doc, containerId, index);
    if (byHistory !== undefined) return byHistory;
    // Ask Loro (slow on a fresh fork; rare).
    const path = doc.getPathToContainer(containerId as ContainerID);
    if (path === undefined) return undefined;
    return { root: String(path[0]), rowId: path.length >= 2 ? String(path[1]) : key };
  };
  for (const op of ops) {
    const key = (op.content as { key?: unknown }).key;
    const row = rowOf(op.container, typeof key === "string" ? key : undefined);
    // A container no longer reachable (its row was deleted) changes nothing a reader sees.
    if (row === undefined) continue;
    if (row.root !== ENTITIES && row.root !== RELATIONS) {
      if (row.root !== META) changes.foreignRoots.add(row.root);
      continue;
    }
    if (row.rowId === undefined) {
      changes.foreignRoots.add(`${row.root} (written as something other than a map)`);
      continue;
    }
    (row.root === ENTITIES ? changes.entities : changes.relations).add(row.rowId);
  }
  return changes;
}

/**
 * The row a container belongs to, read off the op that created it (a container's id is that op's id):
 * its parent and key, up to a root map, which works for containers of deleted rows too (history keeps
 * them); else its path, when it is live. Undefined when neither says. Recorded in `index`.
 */
export function rowOfContainer(
  doc: LoroDoc,
  containerId: string,
  index: ContainerIndex,
): { root: string; rowId: string } | undefined {
  const indexed = index.get(containerId);
  if (indexed !== undefined) return indexed;
  // Its parents up to the row, and the row's key (a live row): a few calls into Loro's own links.
  const live = rowByParents(doc, containerId, index);
  if (live !== undefined) return live;
  // The op that created it (a few op reads, but each decodes a block of the history: ~1 ms at 100k
  // entities; works for deleted rows too).
  const created = rowByCreatingOp(doc, containerId, index);
  if (created !== undefined) return created;
  // Else Loro's path (its parent links are built on first use: costly on a document never read whole).
  const path = doc.getPathToContainer(containerId as ContainerID);
  if (path !== undefined && path.length >= 2) {
    const row = { root: String(path[0]), rowId: String(path[1]) };
    index.set(containerId, row);
    return row;
  }
  return undefined;
}

/** The key of a row's map in its root `root`, whose container is `rootId` (undefined: not there, by its path). */
function rowKey(doc: LoroDoc, rowMapId: ContainerID, root: string, rootId: string): string | undefined {
  const read = keysReadByOps.get(doc) ?? 0;
  if (!pathsBuilt.has(doc) && read < rowKeysByOps) {
    keysReadByOps.set(doc, read + 1);
    // The op put the map at its key: the row's id, live or deleted since (the history says the same
    // of a deleted row's containers, `rowByCreatingOp`). Asking the root whether it still holds the
    // map would decode the root whole, which is what this avoids.
    const created = creatingKey(doc, rowMapId);
    if (created !== undefined && created.parent === rootId) return created.key;
  }
  pathsBuilt.add(doc);
  const path = doc.getPathToContainer(rowMapId);
  if (path === undefined || path.length !== 2 || String(path[0]) !== root) return undefined;
  return String(path[1]);
}

/** The parent and key of the op that created container `containerId` (its id is that op's). */
function creatingKey(doc: LoroDoc, containerId: string): { parent: string; key: string } | undefined {
  const match = /^cid:(\d+)@(\d+):/.exec(containerId);
  if (match === null) return undefined;
  const peer = match[2] as `${number}`;
  const counter = Number(match[1]);
  if ((doc.oplogVersion().get(peer) ?? 0) <= counter) return undefined;
  const op = doc
    .exportJsonInIdSpan({ peer, counter, length: 1 })
    .flatMap((change) => change.ops)
    .find((candidate) => candidate.counter === counter);
  const content = op?.content as { key?: unknown } | undefined;
  if (op === undefined || typeof content?.key !== "string") return undefined;
  return { parent: op.container, key: content.key };
}

/** Each document's containers' parents, by id, as read (a container never moves; null: a root). */
const parentsRead = new WeakMap<LoroDoc, Map<string, string | null>>();

/**
 * The id of a container's parent (undefined: a root, or no such container), read once per document:
 * a push's containers are walked up by the depth check (`unreadableKeys`) and again to find their rows.
 * The walk goes on from the parent's handle up to a container already read or a root, so no level
 * above the first is looked up by id again: the 33,307 marker field maps a shift writes at 100,000
 * entities are walked to their rows in 180–200 ms this way, 410–450 ms looking each level up by id.
 */
export function parentIdOf(doc: LoroDoc, containerId: string): string | undefined {
  let parents = parentsRead.get(doc);
  if (parents === undefined) {
    parents = new Map();
    parentsRead.set(doc, parents);
  }
  const known = parents.get(containerId);
  if (known !== undefined) return known ?? undefined;
  if (rootPattern.test(containerId)) {
    parents.set(containerId, null);
    return undefined;
  }
  let handle: Container | undefined;
  try {
    handle = doc.getContainerById(containerId as ContainerID);
  } catch {
    return undefined;
  }
  let id = containerId;
  // Up to 64 levels (the depth check refuses far fewer); each handle's memory back at once, not when
  // the collector finalizes it.
  for (let depth = 0; handle !== undefined && depth < 64; depth++) {
    const parentHandle: Container | undefined = handle.parent();
    handle.free();
    const parent = parentHandle?.id;
    parents.set(id, parent ?? null);
    if (parent === undefined || parents.has(parent) || rootPattern.test(parent)) {
      parentHandle?.free();
      break;
    }
    id = parent;
    handle = parentHandle;
    if (depth === 63) parentHandle?.free();
  }
  return parents.get(containerId) ?? undefined;
}

/**
 * The row a live container belongs to, by its parents (`Container.parent`) up to the row's map, and
 * that map's key in its root (`rowKey`). Undefined for a container not under a root (no such
 * container): the caller asks the history.
 */
function rowByParents(
  doc: LoroDoc,
  containerId: string,
  index: ContainerIndex,
): { root: string; rowId: string } | undefined {
  const chain: string[] = [];
  let current = containerId;
  for (let depth = 0; depth < 64; depth++) {
    const known = index.get(current);
    if (known !== undefined) {
      for (const id of chain) index.set(id, known);
      return known;
    }
    chain.push(current);
    const parent = parentIdOf(doc, current);
    if (parent === undefined) return undefined;
    const root = rootPattern.exec(parent)?.[1];
    if (root === undefined) {
      current = parent;
      continue;
    }
    // `current` is a row's map: its key, if it is still in its root.
    const rowId = rowKey(doc, current as ContainerID, root, parent);
    if (rowId === undefined) return undefined;
    const row = { root, rowId };
    for (const id of chain) index.set(id, row);
    return row;
  }
  return undefined;
}

/** The row a container belongs to, read off the ops that created it and its parents up to a root map. */
function rowByCreatingOp(
  doc: LoroDoc,
  containerId: string,
  index: ContainerIndex,
): { root: string; rowId: string } | undefined {
  const chain: string[] = [];
  let current = containerId;
  for (let depth = 0; depth < 64; depth++) {
    const known = index.get(current);
    if (known !== undefined) {
      for (const id of chain) index.set(id, known);
      return known;
    }
    const created = creatingKey(doc, current);
    if (created === undefined) return undefined;
    chain.push(current);
    const root = rootPattern.exec(created.parent)?.[1];
    if (root !== undefined) {
      const row = { root, rowId: created.key };
      for (const id of chain) index.set(id, row);
      return row;
    }
    current = created.parent;
  }
  return undefined;
}
