import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";
import { positionBetween } from "./fractional-position.ts";

test("10,000 appends, and 10,000 prepends, keep every key at most 12 characters, in order", () => {
  for (const append of [true, false]) {
    const keys: string[] = [];
    let last: string | undefined;
    for (let index = 0; index < 10_000; index++) {
      last = append ? positionBetween(last, undefined) : positionBetween(undefined, last);
      keys.push(last);
    }
    const longest = Math.max(...keys.map((key) => key.length));
    assert.ok(longest <= 12, `longest key ${longest}`);
    const sorted = [...keys].sort();
    assert.deepEqual(append ? sorted : sorted.reverse(), keys);
  }
});

test("inserts at random places always land strictly between their neighbours", () => {
  let seed = 7;
  const next = (below: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % below;
  };
  const keys: string[] = [];
  for (let index = 0; index < 3000; index++) {
    const at = next(keys.length + 1);
    const key = positionBetween(keys[at - 1], keys[at]);
    if (at > 0) assert.ok(keys[at - 1]! < key, `${keys[at - 1]} < ${key}`);
    if (at < keys.length) assert.ok(key < keys[at]!, `${key} < ${keys[at]}`);
    keys.splice(at, 0, key);
  }
});

test("keys written before the library (base-36 halves) still get a key strictly between them", () => {
  for (const [before, after] of [
    ["i", "r"],
    ["i", undefined],
    [undefined, "i"],
    ["izzzz", "j"],
    ["a0", "i"],
    ["b1A", "c"],
    ["r", "r"],
  ] as const) {
    const key = positionBetween(before, after);
    if (before !== undefined) assert.ok(before < key, `${before} < ${key}`);
    if (after !== undefined && after !== before) assert.ok(key < after, `${key} < ${after}`);
  }
});

test("appending 300 clips to a track through the session keeps positions short", () => {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema);
  const track = session.entities.create({ entityKind: "track", payload: { role: "video" } });
  for (let index = 0; index < 300; index++) {
    const clip = session.entities.create({ entityKind: "clip" });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: track.entityId,
      endpoint1EntityId: clip.entityId,
    });
  }
  const positions = session.relations
    .list({ relationKind: "contain" })
    .map(
      (relation) =>
        (doc.getMap("relations").get(relation.relationId) as { get(key: string): unknown }).get(
          "position",
        ) as string,
    );
  assert.equal(positions.length, 300);
  assert.ok(
    Math.max(...positions.map((position) => position.length)) <= 3,
    JSON.stringify(positions.slice(-3)),
  );
});

test("appends after keys holding characters past z (written by other writers) sort after them", () => {
  for (const start of ["~abc", "~", "z~", "~~~", "a0~", "~\u00e9", "zz"]) {
    let last = start;
    for (let index = 0; index < 1000; index++) {
      const key = positionBetween(last, undefined);
      assert.ok(last < key, `${JSON.stringify(last)} < ${JSON.stringify(key)}`);
      last = key;
    }
    assert.ok(last.length <= start.length + 16, `after 1,000 appends to ${start}: ${last.length} characters`);
  }
});

test("2,000 random pairs of printable keys get a key strictly between them", () => {
  let seed = 11;
  const next = (below: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % below;
  };
  const randomKey = () =>
    Array.from({ length: 1 + next(5) }, () => String.fromCharCode(0x21 + next(0x7e - 0x21 + 1))).join("");
  for (let round = 0; round < 2000; round++) {
    const [low, high] = [randomKey(), randomKey()].sort();
    if (low === high) continue;
    const between = positionBetween(low, high);
    assert.ok(low! < between && between < high!, `${JSON.stringify([low, between, high])}`);
    const appended = positionBetween(high, undefined);
    assert.ok(high! < appended, `${JSON.stringify([high, appended])}`);
    const prepended = positionBetween(undefined, low);
    assert.ok(prepended < low!, `${JSON.stringify([prepended, low])}`);
  }
});
