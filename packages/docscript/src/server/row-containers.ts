/**
 * The container index's rows (ADR 0514): the maps a stored row is made of, read through Loro's
 * container handles when a row is stored whole, and a row's new JSON made from its stored JSON and the
 * plain values a change set into those maps, so a change of many rows' fields is staged without
 * reading each row back out of Loro (~70 µs a row at 100k entities, its maps decoded one by one).
 */
import { isContainer, type JsonChange, type JsonOp, type LoroDoc, LoroMap } from "loro-crdt";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { isPlainRecord } from "../schema/own-keys.ts";
import { containerValuePrefix } from "./changed-rows.ts";
import type { ContainerEntry, ContainerPlace, RowRoot } from "./document-store.ts";
import { maxContainerDepth } from "./push-checks.ts";

/**
 * The maps of a row: its own (path `[]`) and every map reached from it through map keys, each with
 * the keys down to it. Read through handles, never from a value: a plain value shaped like a container
 * id is no container. Maps inside lists are not recorded (their place moves with the list).
 */
export function mapsOfRow(row: LoroMap): ContainerEntry[] {
  const found: ContainerEntry[] = [];
  const walk = (map: LoroMap, path: readonly string[]) => {
    found.push([map.id, path]);
    for (const [key, value] of map.entries()) {
      if (value instanceof LoroMap && path.length < maxContainerDepth) walk(value, [...path, key]);
      if (isContainer(value)) value.free();
    }
  };
  walk(row, []);
  return found;
}

/**
 * `mapsOfRow(row)` when the row's JSON (`json`, as read out of `row`) is at hand: only the keys whose
 * value there is a record are asked of Loro (a map's JSON is always one), not every value of every map
 * (`entries` hands each across; 2.5–7.6 s for the 30,000 rows of a 5 MB snapshot). A map whose JSON is
 * no plain record (a key `__proto__`) is walked by its entries. The maps found are `mapsOfRow`'s, in
 * the order of the JSON's keys.
 */
export function mapsOfRowByJson(row: LoroMap, json: unknown): ContainerEntry[] {
  const found: ContainerEntry[] = [];
  const walk = (map: LoroMap, path: readonly string[], value: unknown) => {
    if (!isPlainRecord(value)) {
      for (const entry of mapsOfRow(map)) found.push([entry[0], [...path, ...entry[1]]]);
      return;
    }
    found.push([map.id, path]);
    if (path.length >= maxContainerDepth) return;
    for (const [key, inner] of Object.entries(value as Record<string, unknown>)) {
      if (typeof inner !== "object" || inner === null || Array.isArray(inner)) continue;
      const child = map.get(key) as unknown;
      if (child instanceof LoroMap) walk(child, [...path, key], inner);
      if (isContainer(child)) child.free();
    }
  };
  walk(row, [], json);
  return found;
}

/**
 * A row's value read out of its root map: a map's JSON, its handle freed (with `maps`, its maps told
 * first, read through the handle); any other value as it is. Undefined: no such row.
 */
export function rowValueOf(
  root: LoroMap,
  rowId: string,
  maps?: (entries: ContainerEntry[]) => void,
): unknown {
  const value = root.get(rowId) as unknown;
  if (!(value instanceof LoroMap)) return value;
  const json = value.toJSON() as unknown;
  maps?.(mapsOfRow(value));
  value.free();
  return json;
}

/** The maps of every row of `doc` (a document created whole), by root and row id. */
export function mapsOfRows(doc: LoroDoc): (root: RowRoot, rowId: string) => ContainerEntry[] | undefined {
  const found = {
    [ENTITIES]: new Map<string, ContainerEntry[]>(),
    [RELATIONS]: new Map<string, ContainerEntry[]>(),
  };
  for (const root of [ENTITIES, RELATIONS] as const) {
    for (const [rowId, value] of doc.getMap(root).entries()) {
      if (value instanceof LoroMap) found[root].set(rowId, mapsOfRow(value));
      if (isContainer(value)) value.free();
    }
  }
  return (root, rowId) => found[root].get(rowId);
}

/** A plain value set into a row's map at `path` (keys from the row's map), under `key`. */
export interface FieldSet {
  readonly path: readonly string[];
  readonly key: string;
  readonly value: string | number | boolean | null;
}

/**
 * The set an op makes, when it is a map insert of a plain value (null, a boolean, a finite number, a
 * string) into a map the index places: read back, the map holds exactly that value under that key.
 */
export function fieldSetOf(op: JsonOp, place: ContainerPlace | undefined): FieldSet | undefined {
  if (place === undefined) return undefined;
  const content = op.content as { type?: unknown; key?: unknown; value?: unknown };
  if (content.type !== "insert" || typeof content.key !== "string") return undefined;
  const value = content.value;
  const plain =
    value === null ||
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isFinite(value)) ||
    (typeof value === "string" && !value.startsWith(containerValuePrefix));
  if (!plain) return undefined;
  return { path: place.path, key: content.key, value: value as FieldSet["value"] };
}

/**
 * `json` (a row as stored) with `sets` applied in order; undefined when a set does not land where the
 * index said: its path not a record in the row, its key not in it, or its key holding a record or a
 * list (a map set over a container would leave that container's index entry pointing at nothing). The
 * caller then reads the row whole.
 */
export function patchedRow(json: unknown, sets: readonly FieldSet[]): unknown {
  if (!isPlainRecord(json)) return undefined;
  // Only the records on a set's path are copied (the stored JSON is the projection's, never changed);
  // the rest of the row is shared with it, as the projection shares its rows' values.
  const copies = new Set<Record<string, unknown>>();
  const copyOf = (record: Record<string, unknown>) => {
    const copy = { ...record };
    copies.add(copy);
    return copy;
  };
  const row = copyOf(json as Record<string, unknown>);
  for (const set of sets) {
    let at = row;
    for (const key of set.path) {
      const next = at[key];
      if (!Object.hasOwn(at, key) || !isPlainRecord(next)) return undefined;
      const record = next as Record<string, unknown>;
      if (copies.has(record)) at = record;
      else {
        // `at` is a copy already: its key now holds the copy below it.
        const copy = copyOf(record);
        at[key] = copy;
        at = copy;
      }
    }
    if (!Object.hasOwn(at, set.key)) return undefined;
    const old = at[set.key];
    if (typeof old === "object" && old !== null) return undefined;
    at[set.key] = set.value;
  }
  return row;
}

/** The containers a change's ops write into. */
export function containersWritten(changes: readonly JsonChange[]): string[] {
  const ids = new Set<string>();
  for (const change of changes) for (const op of change.ops) ids.add(op.container);
  return [...ids];
}
