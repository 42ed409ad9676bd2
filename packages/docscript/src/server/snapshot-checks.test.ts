/**
 * A created document's snapshot is checked without exporting its history as JSON, in steps between
 * which the event loop runs (ADR 0554), and refuses what the push check refuses (ADR 0553): over
 * random hostile histories, the reasons are the push check's own, word for word (a history nesting
 * too deep is refused for that alone).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { LoroDoc, LoroList, LoroMap } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { rowsOfSpans } from "./changed-rows.ts";
import { DocumentHost } from "./document-host.ts";
import { changesIn, maxContainerDepth, unreadableKeys } from "./push-checks.ts";
import { foreignRootReasons } from "./push-staging.ts";
import { mapsOfRow, mapsOfRowByJson } from "./row-containers.ts";
import { historyReasons } from "./snapshot-history.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const token = "token-snapshot-checks-0123456789";
const deepReason = `the update nests containers more than ${maxContainerDepth} levels deep`;

/** What the push check's pieces say of every change of `doc`'s history (ADR 0553's create check). */
function pushCheckReasons(doc: LoroDoc): string[] {
  const spans = doc.findIdSpansBetween([], doc.frontiers()).forward;
  const changes = changesIn(doc, spans);
  return [
    ...unreadableKeys(doc, spans, changes),
    ...foreignRootReasons(rowsOfSpans(doc, spans, new Map(), changes).foreignRoots),
  ];
}

const fieldsOf = (doc: LoroDoc, rowId: string) =>
  (doc.getMap("entities").get(rowId) as LoroMap).get("fields") as LoroMap;

/** Maps nested `levels` deep under `map`'s key `key`, a value in the last. */
function nest(map: LoroMap, key: string, levels: number): void {
  let at = map;
  for (let level = 0; level < levels; level++) at = at.setContainer(key, new LoroMap());
  at.set("v", 1);
}

/** Hostile and harmless edits a snapshot's history may hold, each committed as a change of its own. */
const edits: ((doc: LoroDoc, random: () => number) => void)[] = [
  (doc) => fieldsOf(doc, "track-1").set("__proto__", 1),
  (doc) => {
    fieldsOf(doc, "track-1").set("__proto__", 1);
    doc.commit();
    fieldsOf(doc, "track-1").delete("__proto__");
  },
  (doc, random) => {
    const rowId = `gone-${Math.floor(random() * 1000)}`;
    doc
      .getMap("entities")
      .setContainer(rowId, new LoroMap())
      .setContainer("fields", new LoroMap())
      .set("__proto__", 2);
    doc.commit();
    doc.getMap("entities").delete(rowId);
  },
  (doc) => {
    doc.getMap("secrets").set("key", "value");
    doc.commit();
    doc.getMap("secrets").delete("key");
  },
  (doc) => doc.getMap("other").setContainer("inner", new LoroMap()).set("a", 1),
  (doc) => doc.getList("entities").insert(0, "row"),
  (doc) => doc.getList("relations").insertContainer(0, new LoroMap()).set("k", 1),
  (doc) => doc.getText("meta").insert(0, "notes"),
  (doc) =>
    doc.getMap("meta").setContainer("list", new LoroList()).insertContainer(0, new LoroMap()).set("x", 1),
  (doc, random) => nest(fieldsOf(doc, "track-1"), "n", maxContainerDepth - 2 + Math.floor(random() * 4)),
  (doc, random) => nest(doc.getMap("meta"), "m", maxContainerDepth - 1 + Math.floor(random() * 3)),
  (doc) => fieldsOf(doc, "track-1").set("name", "Renamed"),
];

describe("a created document's snapshot", () => {
  it("refuses what the push check refuses, in its words, over 300 random histories", async () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 300; seed++) {
      const random = seededRandom(seed);
      const doc = new LoroDoc();
      doc.import(sampleTimelineSnapshot());
      const steps = 1 + Math.floor(random() * 4);
      for (let step = 0; step < steps; step++) {
        doc.setPeerId(1 + Math.floor(random() * 3));
        edits[Math.floor(random() * edits.length)]?.(doc, random);
        doc.commit();
      }
      const snapshot = doc.export({ mode: "snapshot" });
      // The same reasons, in whatever order (each check lists them as it meets them).
      const expected = pushCheckReasons(LoroDoc.fromSnapshot(snapshot)).sort();
      const found = (await historyReasons(LoroDoc.fromSnapshot(snapshot))).sort();
      // Too deep: that reason alone (nothing else of the history is read past it).
      if (expected.includes(deepReason)) assert.deepEqual(found, [deepReason], `seed ${seed}`);
      else assert.deepEqual(found, expected, `seed ${seed}`);
      for (const reason of expected.length === 0 ? ["none"] : expected)
        seen.add(
          ["__proto__", "levels deep", "something other than a map", "root container"].find((kind) =>
            reason.includes(kind),
          ) ?? reason,
        );
    }
    // Every kind of refusal was met, and histories refused for nothing.
    assert.deepEqual([...seen].sort(), [
      "__proto__",
      "levels deep",
      "none",
      "root container",
      "something other than a map",
    ]);
  });

  it("is created without its history exported as JSON", async () => {
    const doc = LoroDoc.fromSnapshot(largeTimeline(200).snapshot);
    for (let index = 0; index < 20; index++) {
      doc.setPeerId(100 + index);
      fieldsOf(doc, "track-1").set("name", `Track ${index}`);
      doc.commit({ message: JSON.stringify({ planId: `plan-${index}` }) });
    }
    const exported: string[] = [];
    const originals = {
      exportJsonInIdSpan: LoroDoc.prototype.exportJsonInIdSpan,
      exportJsonUpdates: LoroDoc.prototype.exportJsonUpdates,
    };
    for (const name of Object.keys(originals) as (keyof typeof originals)[]) {
      LoroDoc.prototype[name] = function (this: LoroDoc, ...args: never[]) {
        exported.push(name);
        return (originals[name] as (...args: never[]) => never).apply(this, args);
      } as never;
    }
    const store = createSqliteDocumentStore({ path: ":memory:" });
    try {
      const host = new DocumentHost({ store, schema: timelineSchema });
      assert.equal(await host.create("doc", token, doc.export({ mode: "snapshot" })), true);
      assert.deepEqual(exported, [], "no JSON export of the history");
      // What it stored is the document: its plans, its rows.
      assert.equal((await host.planState("doc", "plan-19")).state, "applied");
      const page = await host.entityPage("doc", { kinds: ["track"], limit: 10 });
      assert.ok(page.entities.some((track) => track.payload.name === "Track 19"));
    } finally {
      Object.assign(LoroDoc.prototype, originals);
      await store.close();
    }
  });

  it("lets a read asked meanwhile be answered before a large create ends", async () => {
    const store = createSqliteDocumentStore({ path: ":memory:" });
    try {
      const host = new DocumentHost({ store, schema: timelineSchema });
      await host.create("small", token, sampleTimelineSnapshot());
      const ended: string[] = [];
      const read = new Promise<void>((resolve, reject) =>
        setTimeout(() => {
          host.snapshot("small").then(() => {
            ended.push("read");
            resolve();
          }, reject);
        }, 0),
      );
      const created = host.create("large", token, largeTimeline(2_000).snapshot).then((made) => {
        ended.push("create");
        return made;
      });
      assert.equal(await created, true);
      await read;
      assert.deepEqual(ended, ["read", "create"]);
    } finally {
      await store.close();
    }
  });

  it("indexes a row's maps as reading every map's entries does", () => {
    const doc = new LoroDoc();
    doc.import(sampleTimelineSnapshot());
    const fields = fieldsOf(doc, "track-1");
    nest(fields, "nested", 3);
    fields.set("plain", { looks: { like: "a map" } });
    fields.setContainer("list", new LoroList()).insertContainer(0, new LoroMap()).set("in", 1);
    fields.setContainer("odd", new LoroMap()).setContainer("__proto__", new LoroMap()).set("x", 1);
    doc.commit();
    const key = ([id, path]: readonly [string, readonly string[]]) => `${id} ${path.join("/")}`;
    for (const root of ["entities", "relations"]) {
      const rows = doc.getMap(root);
      for (const rowId of rows.keys()) {
        const row = rows.get(rowId) as LoroMap;
        assert.deepEqual(
          mapsOfRowByJson(row, row.toJSON()).map(key).sort(),
          mapsOfRow(row).map(key).sort(),
          rowId,
        );
      }
    }
  });
});
