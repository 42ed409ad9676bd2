/**
 * Places per key, at most `max` held at once by each: the count behind every bound on work in flight
 * (a caller's requests or streams, a tenant's driving runs). A key that holds none is forgotten, so a
 * flood of distinct keys (tenants, credentials, documents) leaves nothing behind.
 */

export interface Places<Key = string> {
  /** The most places one key holds at once. */
  readonly max: number;
  /** Keys holding at least one place now. */
  readonly keys: number;
  /**
   * A place for `key`, and the function that gives it back (once: calling it again does nothing);
   * undefined when `key` holds `max` already.
   */
  take(key: Key): (() => void) | undefined;
  /** The places `key` holds now. */
  held(key: Key): number;
}

/** The bound of a {@link Places}, and the name its refusal gives it. */
export interface PlacesOptions {
  /** The most places one key holds at once: a whole number of at least 1. */
  readonly max: number;
  /** The option `max` came from, named when it is refused. Default `"max"`. */
  readonly name?: string;
}

/** Places per key, `max` checked (a `RangeError` naming `name` when it is not a whole number ≥ 1). */
export function createPlaces<Key = string>(options: PlacesOptions): Places<Key> {
  const { max, name = "max" } = options;
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`${name} must be an integer ≥ 1`);
  const counts = new Map<Key, number>();
  return {
    max,
    get keys() {
      return counts.size;
    },
    held: (key) => counts.get(key) ?? 0,
    take(key) {
      const now = counts.get(key) ?? 0;
      if (now >= max) return undefined;
      counts.set(key, now + 1);
      let given = false;
      return () => {
        if (given) return;
        given = true;
        const left = (counts.get(key) ?? 1) - 1;
        if (left === 0) counts.delete(key);
        else counts.set(key, left);
      };
    },
  };
}
