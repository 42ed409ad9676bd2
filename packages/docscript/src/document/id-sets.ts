/**
 * The id sets of a projection's indexes (relation ids by endpoint, variant ids by base): how they are
 * held and how they change. On an overlay a set read from its base is copied before it changes (copy
 * on write), so the base is never changed through the overlay.
 */

/**
 * Ids under one key of an index: one id alone, a few in an array (replaced, never changed), or a set.
 * A set costs ~500 bytes; a clip held is the endpoint of two or three relations.
 */
export type IdSet = string | readonly string[] | Set<string>;

/** Ids an index entry holds in an array before it becomes a set. */
const idsInArray = 8;

const noIds: readonly string[] = [];

/** The ids of an index entry, to iterate. */
export function idsIn(ids: IdSet | undefined): Iterable<string> {
  return ids === undefined ? noIds : typeof ids === "string" ? [ids] : ids;
}

/** How many ids an index entry holds. */
export function idCount(ids: IdSet | undefined): number {
  if (ids === undefined) return 0;
  return typeof ids === "string" ? 1 : Array.isArray(ids) ? ids.length : (ids as Set<string>).size;
}

/** The changes of one projection's id sets; `own` (on an overlay): the sets it made itself. */
export class IdSetWrites {
  private readonly own: Set<Set<string>> | undefined;

  constructor(own: Set<Set<string>> | undefined) {
    this.own = own;
  }

  /** The id set under `key` of `index`, safe to change: on an overlay, a base's set is copied first. */
  changing(index: Map<string, Set<string>>, key: string): Set<string> | undefined {
    const found = index.get(key);
    if (found === undefined || this.own === undefined || this.own.has(found)) return found;
    const copy = new Set(found);
    this.own.add(copy);
    index.set(key, copy);
    return copy;
  }

  /** A new id set, recorded as the overlay's own. */
  made(...ids: string[]): Set<string> {
    const made = new Set(ids);
    this.own?.add(made);
    return made;
  }

  /** Adds `id` to the ids under `key` of `index`. */
  add(index: Map<string, IdSet>, key: string, id: string): void {
    const found = index.get(key);
    if (found === undefined) index.set(key, id);
    else if (typeof found === "string") {
      if (found !== id) index.set(key, [found, id]);
    } else if (Array.isArray(found)) {
      if (found.includes(id)) return;
      index.set(key, found.length < idsInArray ? [...found, id] : this.made(...found, id));
    } else this.changing(index as Map<string, Set<string>>, key)?.add(id);
  }

  /** Removes `id` from the ids under `key` of `index`, and the key once none is left. */
  remove(index: Map<string, IdSet>, key: string, id: string): void {
    const found = index.get(key);
    if (found === undefined) return;
    if (typeof found === "string") {
      if (found === id) index.delete(key);
      return;
    }
    if (Array.isArray(found)) {
      if (!found.includes(id)) return;
      const rest = found.filter((other) => other !== id);
      if (rest.length === 0) index.delete(key);
      else index.set(key, rest.length === 1 ? (rest[0] as string) : rest);
      return;
    }
    const ids = this.changing(index as Map<string, Set<string>>, key);
    ids?.delete(id);
    if (ids?.size === 0) index.delete(key);
  }
}

/** `list` with `item` after its last, as a new array. */
export function appended<T>(list: readonly T[] | undefined, item: T): T[] {
  if (list === undefined || list.length === 0) return [item];
  const next = list.slice();
  next.push(item);
  return next;
}

/** `list` without `item`, as a new array (an empty one when `item` was its only entry). */
export function without<T>(list: readonly T[] | undefined, item: T): readonly T[] {
  if (list === undefined || (list.length === 1 && list[0] === item)) return [];
  return list.filter((other) => other !== item);
}
