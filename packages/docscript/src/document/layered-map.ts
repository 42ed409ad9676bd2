/**
 * A map that reads through to a base map it never changes: what it sets or deletes stays in its own
 * layer. It iterates as a `Map` would after the same calls on a copy of the base (a key set anew keeps
 * its place, a key deleted and set again goes last), so a layer can stand in for a copy without paying
 * for one. The base must not change while a layer over it is in use.
 */
export class LayeredMap<Key, Value> implements Map<Key, Value> {
  private readonly base: ReadonlyMap<Key, Value>;
  /** Base keys given a new value in place. */
  private readonly replaced = new Map<Key, Value>();
  /** Base keys deleted (a key deleted and set again is also in `appended`). */
  private readonly removed = new Set<Key>();
  /** Keys set that the base lacks, or that were deleted from it first: they iterate after the base's. */
  private readonly appended = new Map<Key, Value>();

  constructor(base: ReadonlyMap<Key, Value>) {
    this.base = base;
  }

  get size(): number {
    return this.base.size - this.removed.size + this.appended.size;
  }

  get [Symbol.toStringTag](): string {
    return "LayeredMap";
  }

  private inBase(key: Key): boolean {
    return !this.removed.has(key) && this.base.has(key);
  }

  has(key: Key): boolean {
    return this.appended.has(key) || this.inBase(key);
  }

  get(key: Key): Value | undefined {
    if (this.appended.has(key)) return this.appended.get(key);
    if (!this.inBase(key)) return undefined;
    return this.replaced.has(key) ? this.replaced.get(key) : this.base.get(key);
  }

  set(key: Key, value: Value): this {
    if (this.appended.has(key) || !this.inBase(key)) this.appended.set(key, value);
    else this.replaced.set(key, value);
    return this;
  }

  delete(key: Key): boolean {
    if (this.appended.delete(key)) return true;
    if (!this.inBase(key)) return false;
    this.removed.add(key);
    this.replaced.delete(key);
    return true;
  }

  clear(): void {
    for (const key of this.base.keys()) this.removed.add(key);
    this.replaced.clear();
    this.appended.clear();
  }

  *entries(): MapIterator<[Key, Value]> {
    for (const [key, value] of this.base) {
      if (this.removed.has(key)) continue;
      yield [key, this.replaced.has(key) ? (this.replaced.get(key) as Value) : value];
    }
    yield* this.appended;
  }

  *keys(): MapIterator<Key> {
    for (const [key] of this.entries()) yield key;
  }

  *values(): MapIterator<Value> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): MapIterator<[Key, Value]> {
    return this.entries();
  }

  forEach(callback: (value: Value, key: Key, map: Map<Key, Value>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this);
  }
}
