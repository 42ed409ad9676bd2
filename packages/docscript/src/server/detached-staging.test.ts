/**
 * A run's parts held in a detached replica (ADR 0517): field writes into maps the store's index places
 * are judged from the rows their parts patched, never from Loro's state; anything else moves the parts
 * to an attached replica. Every push is answered and stored as a server without parts answers it, and
 * every read after the answer sees the update, though the live document imports it later.
 */
import assert from "node:assert/strict";
import { LoroDoc, LoroMap } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { describeOnBothStores } from "../../test/on-both-stores.ts";
import {
  clientOf,
  clipRowOf,
  hostHolding,
  markerFieldsOf,
  maxBytes,
  partsOf,
  storedRowsOf,
} from "../../test/staging-fixtures.ts";
import { projectDocument } from "../document/interpret.ts";
import { decodeVersion, encodeVersion } from "../document/version.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import type { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { allRowChanges } from "./row-members.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

/** A host over `store` holding `snapshot` as `doc`, recording for each push judged whether it was detached. */
async function hostWith(store: DocumentStore, snapshot: Uint8Array) {
  const detached: boolean[] = [];
  const host = await hostHolding(store, snapshot, (fields) => detached.push(fields.detached === true));
  return { host, detached };
}

/** Stages `client`'s ops on its peer from `from` to `to` in parts of `size` atoms: each answer. */
async function stageRange(host: DocumentHost, client: LoroDoc, from: number, to: number, size: number) {
  const answers = [];
  for (const part of partsOf(client, from, size, to)) answers.push(await host.stage("doc", part, maxBytes));
  return answers;
}

/** The stored `entities` rows, and those a read of the document's snapshot gives. */
async function storedAndRead(store: DocumentStore, host: DocumentHost) {
  const doc = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
  const read = allRowChanges(projectDocument(doc, timelineSchema)).filter((row) => row.root === "entities");
  return { stored: await storedRowsOf(store), read: new Map(read.map((row) => [row.rowId, row.json])), doc };
}

/** The answer and stored rows of a server that was handed no parts (on SQLite in memory). */
async function withoutParts(snapshot: Uint8Array, update: Uint8Array) {
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const { host } = await hostWith(store, snapshot);
  try {
    const answer = await host.push("doc", update);
    return { answer, stored: await storedRowsOf(store) };
  } finally {
    await host.close();
    await store.close();
  }
}

describeOnBothStores(
  "a run of field writes staged detached is judged from its patched rows, and every read after its answer sees it",
  "detached_field_writes",
  async (store) => {
    const { snapshot } = largeTimeline(120);
    const { host, detached } = await hostWith(store, snapshot);
    try {
      const client = clientOf(snapshot, 61);
      const from = client.oplogVersion();
      for (let index = 0; index < 120; index++) markerFieldsOf(client, index).set("startMs", 80_000 + index);
      client.commit();
      const written = client.oplogVersion().get(client.peerIdStr) ?? 0;
      assert.ok((await stageRange(host, client, 0, written, 25)).every((answer) => answer.staged));
      const update = client.export({ mode: "update", from });
      const answer = await host.push("doc", update);
      assert.equal(answer.status, "committed", JSON.stringify(answer));
      assert.deepEqual(detached, [true]);
      // Asked at once, while the live document may still be taking the update: the pull brings it.
      const pulled = await host.updatesSince("doc", encodeVersion(from));
      const replica = clientOf(snapshot, 62);
      replica.import(pulled.bytes);
      assert.deepEqual(replica.getMap("entities").toJSON(), client.getMap("entities").toJSON());
      assert.equal(decodeVersion(pulled.version).compare(client.oplogVersion()), 0);
      const { stored, read, doc } = await storedAndRead(store, host);
      assert.deepStrictEqual(stored, read);
      assert.deepEqual(doc.getMap("entities").toJSON(), client.getMap("entities").toJSON());
      const plain = await withoutParts(snapshot, update);
      assert.deepEqual(answer, plain.answer);
      assert.deepStrictEqual(stored, plain.stored);
      // A push made on the version the answer named is judged on the document that holds the run.
      const next = clientOf(doc.export({ mode: "snapshot" }), 63);
      const nextFrom = next.oplogVersion();
      markerFieldsOf(next, 5).set("startMs", 5);
      next.commit();
      const second = await host.push("doc", next.export({ mode: "update", from: nextFrom }));
      assert.equal(second.status, "committed", JSON.stringify(second));
      const version = (await host.planState("doc", "none")).version;
      assert.equal(decodeVersion(version).compare(next.oplogVersion()), 0);
    } finally {
      await host.close();
    }
  },
);

describeOnBothStores(
  "a run that writes more than field values moves its parts to an attached replica, answered as without parts",
  "detached_then_attached",
  async (store) => {
    const { snapshot } = largeTimeline(60);
    const { host, detached } = await hostWith(store, snapshot);
    try {
      const client = clientOf(snapshot, 64);
      const from = client.oplogVersion();
      for (let index = 0; index < 40; index++) markerFieldsOf(client, index).set("startMs", 90_000 + index);
      client.commit();
      const fieldWrites = client.oplogVersion().get(client.peerIdStr) ?? 0;
      // A field removed, then set again: the removal is no value set.
      const clipFields = clipRowOf(client, 3).get("fields") as LoroMap;
      clipFields.delete("speed");
      client.commit();
      clipFields.set("speed", 1.5);
      client.commit();
      const written = client.oplogVersion().get(client.peerIdStr) ?? 0;
      assert.ok((await stageRange(host, client, 0, written, 10)).every((answer) => answer.staged));
      assert.ok(written > fieldWrites);
      const update = client.export({ mode: "update", from });
      const answer = await host.push("doc", update);
      const plain = await withoutParts(snapshot, update);
      assert.deepEqual(answer, plain.answer);
      assert.equal(answer.status, "committed", JSON.stringify(answer));
      assert.deepEqual(detached, [false]);
      const { stored, read } = await storedAndRead(store, host);
      assert.deepStrictEqual(stored, read);
      assert.deepStrictEqual(stored, plain.stored);
    } finally {
      await host.close();
    }
  },
);

describeOnBothStores(
  "what a push carries past its detached parts is staged with them: field values detached, anything else attached",
  "detached_tail",
  async (store) => {
    const { snapshot } = largeTimeline(80);
    const { host, detached } = await hostWith(store, snapshot);
    try {
      // Values past the parts: the push is still judged detached, from rows patched at the push.
      const client = clientOf(snapshot, 65);
      let from = client.oplogVersion();
      for (let index = 0; index < 60; index++) markerFieldsOf(client, index).set("startMs", 95_000 + index);
      client.commit();
      const staged = client.oplogVersion().get(client.peerIdStr) ?? 0;
      assert.ok((await stageRange(host, client, 0, staged, 20)).every((answer) => answer.staged));
      for (let index = 50; index < 80; index++) markerFieldsOf(client, index).set("startMs", 96_000 + index);
      client.commit();
      let update = client.export({ mode: "update", from });
      let answer = await host.push("doc", update);
      assert.equal(answer.status, "committed", JSON.stringify(answer));
      assert.deepEqual(answer, (await withoutParts(snapshot, update)).answer);
      // A map nested into a marker's fields past the parts: judged attached, refused as without parts.
      const base = (await host.snapshot("doc")).bytes;
      const second = clientOf(base, 66);
      from = second.oplogVersion();
      for (let index = 0; index < 30; index++) markerFieldsOf(second, index).set("startMs", 1_000 + index);
      second.commit();
      const counter = second.oplogVersion().get(second.peerIdStr) ?? 0;
      assert.ok((await stageRange(host, second, 0, counter, 10)).every((result) => result.staged));
      markerFieldsOf(second, 7).setContainer("extra", new LoroMap()).set("note", "nested");
      second.commit();
      update = second.export({ mode: "update", from });
      answer = await host.push("doc", update);
      assert.deepEqual(answer, (await withoutParts(base, update)).answer);
      assert.equal(answer.status, "rejected", JSON.stringify(answer));
      assert.deepEqual(detached, [true, false]);
      const { stored, read } = await storedAndRead(store, host);
      assert.deepStrictEqual(stored, read);
    } finally {
      await host.close();
    }
  },
);
