/**
 * The keyed count of places every in-flight bound shares: 2,000 random sequences of takes and
 * releases (a release called again, or long after) over a few keys, checked after each step against a
 * plain Map kept apart from it; then the promises stated plainly.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { createPlaces } from "./places.ts";

interface Taken {
  readonly key: string;
  readonly release: () => void;
  released: boolean;
}

it("counts like a plain Map over 2,000 random sequences of takes and releases", () => {
  for (let seed = 1; seed <= 2_000; seed += 1) {
    const random = seededRandom(seed);
    const max = 1 + Math.floor(random() * 4);
    const keys = ["a", "b", "c", "d"].slice(0, 1 + Math.floor(random() * 4));
    const places = createPlaces({ max });
    const oracle = new Map<string, number>();
    const taken: Taken[] = [];
    const steps = 20 + Math.floor(random() * 60);
    for (let step = 0; step < steps; step += 1) {
      const at = `seed ${seed}, step ${step}`;
      if (taken.length === 0 || random() < 0.55) {
        const key = keys[Math.floor(random() * keys.length)] as string;
        const release = places.take(key);
        const had = oracle.get(key) ?? 0;
        if (had >= max) {
          assert.equal(release, undefined, `${at}: ${key} holds ${had} of ${max}, yet was given a place`);
        } else {
          assert.notEqual(release, undefined, `${at}: ${key} holds ${had} of ${max}, yet was refused`);
          oracle.set(key, had + 1);
          taken.push({ key, release: release as () => void, released: false });
        }
      } else {
        // Any place taken so far, given back already or not: a second release is a no-op.
        const place = taken[Math.floor(random() * taken.length)] as Taken;
        place.release();
        if (!place.released) {
          place.released = true;
          const left = (oracle.get(place.key) as number) - 1;
          if (left === 0) oracle.delete(place.key);
          else oracle.set(place.key, left);
        }
      }
      for (const key of keys) {
        assert.equal(places.held(key), oracle.get(key) ?? 0, `${at}: ${key}'s count`);
        assert.ok(places.held(key) <= max, `${at}: ${key} holds more than ${max}`);
      }
      assert.equal(places.keys, oracle.size, `${at}: a key is kept at 0, or one holding places is lost`);
    }
  }
});

it("forgets every key once its places are back, however many distinct keys came", () => {
  const places = createPlaces({ max: 2 });
  const releases = Array.from({ length: 10_000 }, (_, index) => places.take(`tenant-${index}`));
  assert.equal(places.keys, 10_000);
  for (const release of releases) release?.();
  assert.equal(places.keys, 0);
  assert.equal(places.held("tenant-0"), 0);
});

it("refuses a key at its bound while another key still takes, and takes again once one is back", () => {
  const places = createPlaces({ max: 2 });
  const first = places.take("a");
  assert.ok(places.take("a"));
  assert.equal(places.take("a"), undefined);
  assert.ok(places.take("b"));
  first?.();
  first?.();
  assert.equal(places.held("a"), 1);
  assert.ok(places.take("a"));
  assert.equal(places.take("a"), undefined);
});

it("refuses a bound that is not a whole number of at least 1, naming its option", () => {
  for (const max of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => createPlaces({ max, name: "maxStreams" }), {
      name: "RangeError",
      message: "maxStreams must be an integer ≥ 1",
    });
  }
  assert.throws(() => createPlaces({ max: 0 }), { message: "max must be an integer ≥ 1" });
});
