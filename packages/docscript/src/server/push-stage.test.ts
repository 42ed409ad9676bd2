/**
 * Parts of a run's update staged ahead of its push (ADR 0508): the push is judged exactly as it would
 * be without them (the same answer, rows and document), reading the rows the parts read; parts that
 * arrive out of order are staged in order; parts of another update, or that do not follow, never
 * reach a push's judgement.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import {
  clientOf,
  hostHolding,
  markerFieldsOf,
  maxBytes,
  partsOf,
  storedRowsOf,
} from "../../test/staging-fixtures.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

/** A host over a fresh store holding the document `doc`, logging how many rows each push read before. */
async function hostWith(snapshot: Uint8Array) {
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const readBefore: number[] = [];
  const fills: number[] = [];
  const host = await hostHolding(store, snapshot, (fields) => {
    readBefore.push(Number(fields.readBefore));
    fills.push(Number(fields.fills));
  });
  return { store, host, readBefore, fills };
}

/** The markers' fields of the first `count` added clips. */
function markerFields(client: LoroDoc, count: number): LoroMap[] {
  return Array.from({ length: count }, (_, index) => markerFieldsOf(client, index));
}

/** A client on peer `peer` that set the first `count` markers' starts to `start(index)`, and its version before. */
function markersMoved(snapshot: Uint8Array, peer: number, count: number, start: (index: number) => number) {
  const client = clientOf(snapshot, peer);
  const from = client.oplogVersion();
  for (const [index, fields] of markerFields(client, count).entries()) fields.set("startMs", start(index));
  client.commit();
  return { client, from };
}

test("a push whose parts were staged is answered and stored as without them, reading the rows they read", async () => {
  const { snapshot } = largeTimeline(300);
  const staged = await hostWith(snapshot);
  const plain = await hostWith(snapshot);
  try {
    const { client, from } = markersMoved(snapshot, 41, 300, (index) => 90_000 + index * 10);
    const written = client.oplogVersion().get("41") ?? 0;
    for (const part of partsOf(client, 0, 70, written))
      assert.deepEqual(await staged.host.stage("doc", part, maxBytes), { staged: true });
    // Written again after the parts went: the push holds rows newer than the parts read.
    for (const fields of markerFields(client, 5)) fields.set("startMs", 500_000);
    client.commit();
    const update = client.export({ mode: "update", from });
    const answers = [await staged.host.push("doc", update), await plain.host.push("doc", update)];
    assert.equal(answers[0]?.status, "committed", JSON.stringify(answers[0]));
    assert.deepEqual(answers[0], answers[1]);
    assert.deepEqual(await storedRowsOf(staged.store), await storedRowsOf(plain.store));
    // The staged push's check took its 300 rows from the parts; the plain one read them itself.
    assert.ok((staged.readBefore[0] ?? 0) > 0, `read before: ${staged.readBefore}`);
    assert.deepEqual(plain.readBefore, [0]);
    // And what its check looks up was read while the parts waited: the push reads nothing more.
    assert.deepEqual(staged.fills, [0]);
    assert.ok((plain.fills[0] ?? 0) > 0, `plain fills: ${plain.fills}`);
    const after = LoroDoc.fromSnapshot((await staged.host.snapshot("doc")).bytes);
    assert.deepEqual(after.getMap("entities").toJSON(), client.getMap("entities").toJSON());
  } finally {
    await staged.host.close();
    await plain.host.close();
  }
});

test("parts that arrive out of order (separate connections) are staged in order", async () => {
  const { snapshot } = largeTimeline(30);
  const { host } = await hostWith(snapshot);
  try {
    const { client, from } = markersMoved(snapshot, 45, 30, (index) => 150_000 + index);
    const parts = partsOf(client, 0, 5, client.oplogVersion().get("45") ?? 0);
    assert.equal(parts.length, 6);
    // The last first, the first last: each waits for the part before it, then is staged.
    const answers = await Promise.all([...parts].reverse().map((part) => host.stage("doc", part, maxBytes)));
    assert.deepEqual(
      answers,
      parts.map(() => ({ staged: true })),
    );
    const pushed = await host.push("doc", client.export({ mode: "update", from }));
    assert.equal(pushed.status, "committed", JSON.stringify(pushed));
  } finally {
    await host.close();
  }
});

test("a push of another update than the staged parts is judged without them, and they never land", async () => {
  const { snapshot } = largeTimeline(20);
  const { host, readBefore } = await hostWith(snapshot);
  try {
    const runner = clientOf(snapshot, 51);
    const other = clientOf(snapshot, 52);
    const runnerFrom = runner.oplogVersion();
    const [first, second] = markerFields(runner, 2);
    first?.set("startMs", 123_000);
    second?.set("startMs", 124_000);
    runner.commit();
    for (const part of partsOf(runner, 0, 1, 2))
      assert.equal((await host.stage("doc", part, maxBytes)).staged, true);
    // Another client's push comes first: its judgement holds nothing of the parts.
    const otherFrom = other.oplogVersion();
    markerFields(other, 3)[2]?.set("startMs", 125_000);
    other.commit();
    const pushed = await host.push("doc", other.export({ mode: "update", from: otherFrom }));
    assert.equal(pushed.status, "committed", JSON.stringify(pushed));
    assert.deepEqual(readBefore, [0]);
    const between = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    const starts = markerFields(between, 3).map((fields) => fields.get("startMs"));
    assert.notEqual(starts[0], 123_000);
    assert.notEqual(starts[1], 124_000);
    assert.equal(starts[2], 125_000);
    // The staged run's push, later, is judged as any push (its parts were dropped with the shadow).
    const late = await host.push("doc", runner.export({ mode: "update", from: runnerFrom }));
    assert.equal(late.status, "committed", JSON.stringify(late));
    const final = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    assert.deepEqual(
      markerFields(final, 3).map((fields) => fields.get("startMs")),
      [123_000, 124_000, 125_000],
    );
  } finally {
    await host.close();
  }
});

test("a part is refused, and nothing of it imported, when it does not follow, is another run's, or lacks its base", async () => {
  const { snapshot } = largeTimeline(10);
  const { host, readBefore } = await hostWith(snapshot);
  try {
    const { client: runner, from } = markersMoved(snapshot, 61, 6, (index) => 200_000 + index);
    const parts = partsOf(runner, 0, 2, 6);
    assert.equal((await host.stage("doc", parts[0]!, maxBytes)).staged, true);
    // Skips a part: its ops depend on ones the server does not hold (it waits for the part before it
    // for a while, in case that one is on its way).
    const skipped = await host.stage("doc", parts[2]!, maxBytes);
    assert.equal(skipped.staged, false);
    assert.match(skipped.reason ?? "", /does not follow/);
    // Another run's part while this one's are staged.
    const other = clientOf(snapshot, 62);
    markerFields(other, 8)[7]?.set("startMs", 300_000);
    other.commit();
    const another = await host.stage("doc", partsOf(other, 0, 1, 1)[0]!, maxBytes);
    assert.deepEqual(another, { staged: false, reason: "another run's update is staged" });
    // A part made on changes the server never had (a third client's unpushed edit).
    const third = clientOf(snapshot, 63);
    markerFields(third, 9)[8]?.set("startMs", 400_000);
    third.commit();
    const thirdBase = third.oplogVersion();
    markerFields(third, 9)[8]?.set("startMs", 410_000);
    third.commit();
    const orphan = third.export({ mode: "update", from: thirdBase });
    assert.equal((await host.stage("doc", orphan, maxBytes)).staged, false);
    // Not bytes of an update at all.
    assert.deepEqual(await host.stage("doc", new Uint8Array([1, 2, 3]), maxBytes), {
      staged: false,
      reason: "the part is not a Loro update",
    });
    // More than a push may carry, waiting or staged.
    assert.deepEqual(await host.stage("doc", parts[1]!, 10), {
      staged: false,
      reason: "too many parts are waiting",
    });
    const flood = await Promise.all(
      Array.from({ length: 4 }, () => host.stage("doc", parts[1]!, parts[1]!.byteLength * 2 + 1)),
    );
    // Two fit while they wait (and are then refused as more than the staged parts may carry).
    assert.deepEqual(
      flood.map((answer) => answer.reason),
      [
        ...Array.from(
          { length: 2 },
          () => `the parts would carry more than ${parts[1]!.byteLength * 2 + 1} bytes`,
        ),
        "too many parts are waiting",
        "too many parts are waiting",
      ],
    );
    // The runner's push lands whole, reading what its first part read.
    const pushed = await host.push("doc", runner.export({ mode: "update", from }));
    assert.equal(pushed.status, "committed", JSON.stringify(pushed));
    assert.equal(readBefore.length, 1);
    // The runner's six starts, and none of the refused parts' writes.
    const starts = (doc: LoroDoc) => markerFields(doc, 9).map((fields) => fields.get("startMs"));
    const original = starts(LoroDoc.fromSnapshot(snapshot));
    assert.deepEqual(starts(LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes)), [
      200_000,
      200_001,
      200_002,
      200_003,
      200_004,
      200_005,
      ...original.slice(6),
    ]);
  } finally {
    await host.close();
  }
});

test("a part nesting containers past the bound is refused unread, and so is its push", async () => {
  const { snapshot } = largeTimeline(4);
  const { host } = await hostWith(snapshot);
  try {
    const runner = clientOf(snapshot, 71);
    const from = runner.oplogVersion();
    const style = (runner.getMap("entities").get("caption-1") as LoroMap).get("fields") as LoroMap;
    let nested = style.setContainer("style", new LoroMap());
    for (let depth = 0; depth < 80; depth++) nested = nested.setContainer("inner", new LoroMap());
    runner.commit();
    const written = runner.oplogVersion().get("71") ?? 0;
    const answer = await host.stage("doc", partsOf(runner, 0, written, written)[0]!, maxBytes);
    assert.deepEqual(answer, { staged: false, reason: "the part writes what no row can hold" });
    const pushed = await host.push("doc", runner.export({ mode: "update", from }));
    assert.equal(pushed.status, "rejected");
    assert.match(JSON.stringify(pushed), /nests containers more than 64 levels deep/);
  } finally {
    await host.close();
  }
});

test("a call that comes while parts wait is answered first, and a push does the parts left", async () => {
  const { snapshot } = largeTimeline(50);
  const { host, readBefore } = await hostWith(snapshot);
  try {
    const { client: runner, from } = markersMoved(snapshot, 81, 50, (index) => 600_000 + index);
    const order: string[] = [];
    const parts = partsOf(runner, 0, 10, 50).map((part, index) =>
      host.stage("doc", part, maxBytes).then((answer) => order.push(`part ${index} ${answer.staged}`)),
    );
    await host
      .rowLookup("doc", [{ rows: "entities", ids: ["large-clip-0"] }])
      .then(() => order.push("lookup"));
    assert.equal(order[0], "lookup", order.join(", "));
    // The push comes before the parts are done: it does them first, then reads what they read.
    const pushed = await host.push("doc", runner.export({ mode: "update", from }));
    assert.equal(pushed.status, "committed", JSON.stringify(pushed));
    await Promise.all(parts);
    assert.deepEqual(
      order.slice(1),
      [0, 1, 2, 3, 4].map((index) => `part ${index} true`),
    );
    assert.ok((readBefore[0] ?? 0) > 0, `read before: ${readBefore}`);
  } finally {
    await host.close();
  }
});

test("a staged run's field out of its bounds is refused by its push, though its rows were read ahead", async () => {
  const { snapshot } = largeTimeline(50);
  const { store, host, readBefore } = await hostWith(snapshot);
  try {
    const before = await storedRowsOf(store);
    // The parts are warmed (their rows' shapes and payloads read ahead) before the push judges them.
    const { client: runner, from } = markersMoved(snapshot, 91, 50, (index) => (index === 37 ? -5 : 700_000));
    for (const part of partsOf(runner, 0, 10, 50))
      assert.deepEqual(await host.stage("doc", part, maxBytes), { staged: true });
    const pushed = await host.push("doc", runner.export({ mode: "update", from }));
    assert.equal(pushed.status, "rejected", JSON.stringify(pushed));
    assert.match(JSON.stringify(pushed), /large-marker-37/);
    assert.ok((readBefore[0] ?? 0) > 0, `read before: ${readBefore}`);
    assert.deepEqual(await storedRowsOf(store), before);
  } finally {
    await host.close();
  }
});
