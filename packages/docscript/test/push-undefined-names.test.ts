/**
 * The server's push check refuses any entity kind, relation kind, field or row key the schema and the
 * mapping do not define, whatever the pushing client sent: names a plain object inherits
 * ("constructor", "toString", "__proto__") included. Pushes are written straight into Loro, as a
 * client that skips the session would.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type LoroDoc, LoroMap } from "loro-crdt";
import { interpretDocument } from "../src/document/interpret.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { withSampleServer } from "./timeline-fixture.ts";

type Edit = (doc: LoroDoc, ids: { track: string; clip: string }) => void;

const fieldsOf = (doc: LoroDoc, entityId: string): LoroMap =>
  (doc.getMap("entities").get(entityId) as LoroMap).get("fields") as LoroMap;

const newRow = (doc: LoroDoc, entityId: string, kind: string, fields: Record<string, unknown>): LoroMap => {
  const row = doc.getMap("entities").setContainer(entityId, new LoroMap());
  row.set("kind", kind);
  const map = row.setContainer("fields", new LoroMap());
  for (const [name, value] of Object.entries(fields)) map.set(name, value as never);
  return row;
};

const newRelation = (doc: LoroDoc, relationId: string, row: Record<string, unknown>): void => {
  const map = doc.getMap("relations").setContainer(relationId, new LoroMap());
  for (const [key, value] of Object.entries(row)) map.set(key, value as never);
};

const inherited = ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf"];

const edits: [string, Edit][] = [
  ...inherited.map((name): [string, Edit] => [
    `a field "${name}" on an existing track`,
    (doc, ids) => fieldsOf(doc, ids.track).set(name, "x"),
  ]),
  ...inherited.map((name): [string, Edit] => [
    `a field "${name}" holding a map`,
    (doc, ids) => fieldsOf(doc, ids.track).setContainer(name, new LoroMap()).set("volume", 1),
  ]),
  ...inherited.map((name): [string, Edit] => [
    `an entity of kind "${name}"`,
    (doc) => void newRow(doc, "made-1", name, {}),
  ]),
  ...inherited.map((name): [string, Edit] => [
    `a relation of kind "${name}"`,
    (doc, ids) =>
      newRelation(doc, "rel-made-1", {
        kind: name,
        endpoint0: ids.track,
        endpoint1: ids.clip,
        position: "m",
      }),
  ]),
  ["a field no kind defines", (doc, ids) => fieldsOf(doc, ids.track).set("secret", "x")],
  [
    "a new track with a field no kind defines",
    (doc) => void newRow(doc, "made-2", "track", { role: "bgm", name: "t", hidden: 1 }),
  ],
  [
    "a key beside the row's kind and fields",
    (doc, ids) => (doc.getMap("entities").get(ids.track) as LoroMap).set("extra", 1),
  ],
  ...inherited.map((name): [string, Edit] => [
    `a row key "${name}"`,
    (doc, ids) => (doc.getMap("entities").get(ids.track) as LoroMap).set(name, 1),
  ]),
  [
    "a relation row with a key the mapping does not define",
    (doc, ids) =>
      newRelation(doc, "rel-made-2", {
        kind: "contain",
        endpoint0: ids.track,
        endpoint1: "clip-new",
        position: "z",
        extra: "x",
      }),
  ],
];

test("a push naming a kind, relation kind, field or row key the schema does not define is rejected; nothing is stored", () =>
  withSampleServer(async ({ client, read }) => {
    const before = await read();
    const entities = interpretDocument(before, timelineSchema).entities;
    const ids = {
      track: entities.find((entity) => entity.entityKind === "track")!.entityId,
      clip: entities.find((entity) => entity.entityKind === "clip")!.entityId,
    };
    for (const [what, edit] of edits) {
      const doc = await read();
      const from = doc.oplogVersion();
      edit(doc, ids);
      doc.commit();
      const pushed = await client.push("doc", doc.export({ mode: "update", from }));
      assert.equal(pushed.status, "rejected", `${what}: ${JSON.stringify(pushed)}`);
    }
    const after = await read();
    assert.deepEqual(after.oplogVersion().toJSON(), before.oplogVersion().toJSON(), "nothing was stored");
    // A defined field still lands, so the refusals above are about the names.
    const doc = await read();
    const from = doc.oplogVersion();
    fieldsOf(doc, ids.track).set("name", "Renamed");
    doc.commit();
    assert.equal((await client.push("doc", doc.export({ mode: "update", from }))).status, "committed");
  }));
