import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { type LargeTimeline, largeTimeline } from "../../test/large-timeline.ts";
import { openDocument } from "../document/document-session.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { runEditScript } from "./run-edit-script.ts";
import { maxReadItems } from "./run-session.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};
const countTracks = "console.log(entities.list({ entityKind: 'track' }).length);";

describe("runEditScript on a warm worker (ADR 0464)", () => {
  const pool = createEditScriptPool({ size: 1 });
  after(() => pool.close());

  it("reads a snapshot once, then serves the same version from the host's run document, then only the updates since", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const run = async (script: string, cachedDocuments?: number) => {
      const result = await runEditScript(
        { pool, schema, hooks: {}, ...(cachedDocuments === undefined ? {} : { cachedDocuments }) },
        { docId: "warm", replica, version: "v", script },
      );
      assert.ok(result.ok, JSON.stringify(result));
      return { source: result.documentSource, logs: result.logs.map((line) => line.text), plan: result.plan };
    };
    const first = await run(
      `entities.create({ entityKind: 'track', payload: { role: 'overlay' } });\n${countTracks}`,
    );
    assert.deepEqual([first.source, first.logs], ["snapshot", ["4"]]);
    const second = await run(countTracks);
    assert.deepEqual(
      [second.source, second.logs],
      ["cached", ["3"]],
      "the unpublished plan's track is not kept",
    );

    // The plan lands on the replica (as a commit and the pull after it would bring it).
    replica.import(first.plan.update);
    const afterCommit = await run(countTracks);
    assert.deepEqual([afterCommit.source, afterCommit.logs], ["updated", ["4"]]);

    // Another peer's change too.
    const fork = replica.fork();
    fork.setPeerId(99);
    openDocument(fork, timelineSchema).entities.create({
      entityKind: "track",
      payload: { role: "voiceover" },
    });
    fork.commit();
    replica.import(fork.export({ mode: "update", from: replica.oplogVersion() }));
    const afterOther = await run(countTracks);
    assert.deepEqual([afterOther.source, afterOther.logs], ["updated", ["5"]]);

    // With nothing kept (after this run empties the cache), every run reads a snapshot.
    await run(countTracks, 0);
    assert.equal((await run(countTracks, 0)).source, "snapshot");
    assert.equal((await run(countTracks, 0)).source, "snapshot");
  });

  it("works from snapshot bytes alone", async () => {
    const result = await runEditScript(
      { pool, schema, hooks: {} },
      { docId: "bytes", snapshot: sampleTimelineSnapshot(), version: "v", script: countTracks },
    );
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(
      result.logs.map((line) => line.text),
      ["3"],
    );
  });
});

/**
 * On a document above the read bound: writes and reads by id, a refused whole read, entity pages and
 * refused page arguments.
 */
async function writesAndEntityPages(
  pool: SandboxPool,
  { snapshot, firstClips, entityCount }: LargeTimeline,
): Promise<void> {
  assert.ok(entityCount > maxReadItems);
  const replica = LoroDoc.fromSnapshot(snapshot);
  const context = { pool, schema, hooks: {} };
  const written = await runEditScript(context, {
    docId: "large",
    replica,
    version: "v",
    script: `for (const id of ${JSON.stringify(firstClips)}) entities.update(id, [{ op: "set", path: ["volume"], value: -4 }]);
console.log(entities.list({ entityKind: "track" }).length, relations.of("${firstClips[0]}").length);`,
  });
  assert.ok(written.ok, JSON.stringify(written));
  assert.equal(written.plan.preview.counts.updated, firstClips.length);
  assert.deepEqual(
    written.logs.map((line) => line.text),
    ["3 3"],
  );
  const copy = replica.fork();
  copy.import(written.plan.update);
  const clip = openDocument(copy, timelineSchema).entities.get(firstClips[0]!);
  assert.equal(clip?.payload.volume, -4);

  const listed = await runEditScript(context, {
    docId: "large",
    replica,
    version: "v",
    script: `const tracks = entities.list({ entityKind: "track" });
const all = entities.list();`,
  });
  assert.equal(listed.ok, false);
  assert.equal(!listed.ok && listed.error.code, "read_limit", JSON.stringify(listed));
  assert.match(!listed.ok ? listed.error.message : "", /more than 20000.*\(line 2, column \d+\)/);
  assert.equal(!listed.ok && (listed.error.data as { line?: number }).line, 2);
  assert.match(
    !listed.ok ? listed.error.message : "",
    /read it in pages \(entities\.list\(\{ entityKind, limit/,
  );

  // Past the bound, pages: limit and after read every entity of the kind once, in entityId order.
  const clips = openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema)
    .entities.list({ entityKind: "clip" })
    .map((clip) => clip.entityId)
    .sort();
  const paged = await runEditScript(context, {
    docId: "large",
    replica,
    version: "v",
    script: `const ids = [];
let after;
for (;;) {
  const page = entities.list({ entityKind: "clip", limit: 1500, ...(after === undefined ? {} : { after }) });
  for (const clip of page) ids.push(clip.entityId);
  if (page.length < 1500) break;
  after = page[page.length - 1].entityId;
}
console.log(ids.length, new Set(ids).size, ids[0], ids[1499], ids[1500], ids[ids.length - 1]);`,
  });
  assert.ok(paged.ok, JSON.stringify(paged).slice(0, 500));
  assert.ok(clips.length > 3000);
  assert.deepEqual(
    paged.logs.map((line) => line.text),
    [[clips.length, clips.length, clips[0], clips[1499], clips[1500], clips.at(-1)].join(" ")],
  );

  for (const [filter, message] of [
    ["{ entityKind: 'clip', limit: 0 }", /limit is a whole number from 1 to 20000, not 0/],
    ["{ entityKind: 'clip', limit: 20001 }", /limit is a whole number from 1 to 20000/],
    ["{ entityKind: 'clip', limit: 5, after: 'no-such-clip' }", /after names no clip "no-such-clip"/],
  ] as const) {
    const refused = await runEditScript(context, {
      docId: "large",
      replica,
      version: "v",
      script: `entities.list(${filter});`,
    });
    assert.ok(!refused.ok && refused.error.code === "invalid_operation", JSON.stringify(refused));
    assert.match(refused.error.message, message);
  }
}

describe("runEditScript on a document the worker could not hold (ADR 0464)", () => {
  // A worker heap far below what the document and its projection take: the worker holds neither.
  const pool = createEditScriptPool({ size: 1, memoryLimitMb: 48 });
  after(() => pool.close());
  const large = largeTimeline(Math.ceil(maxReadItems / 3));
  const { snapshot } = large;

  it("runs writes and reads by id, and refuses a read above the bound with its place in the script", () =>
    writesAndEntityPages(pool, large));

  it("reads relations past the bound in pages: the refusal says how, and the pages walk every relation once, in order", async () => {
    const replica = LoroDoc.fromSnapshot(snapshot);
    const context = { pool, schema, hooks: {} };
    const all = openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema)
      .relations.list()
      .map((relation) => relation.relationId);
    assert.ok(all.length > maxReadItems, `${all.length} relations`);

    const listed = await runEditScript(context, {
      docId: "large",
      replica,
      version: "v",
      script: "relations.list();",
    });
    assert.ok(!listed.ok && listed.error.code === "read_limit", JSON.stringify(listed));
    assert.match(
      listed.error.message,
      /relations\.list\(\) matches more than 20000; .*read it in pages \(relations\.list\(\{ relationKind, limit: 20000, after: <the relationId of the last relation of the previous page> \}\)\).*\(line 1, column \d+\)/,
    );

    // The script hashes the ids it walked, in the order it walked them, with the hash the test uses.
    const paged = await runEditScript(context, {
      docId: "large",
      replica,
      version: "v",
      script: `const orderHash = ${orderHash.toString()};
const ids = [];
let after;
for (;;) {
  const page = relations.list({ limit: 7000, ...(after === undefined ? {} : { after }) });
  for (const relation of page) ids.push(relation.relationId);
  if (page.length < 7000) break;
  after = page[page.length - 1].relationId;
}
console.log(ids.length, new Set(ids).size, orderHash(ids));`,
    });
    assert.ok(paged.ok, JSON.stringify(paged).slice(0, 500));
    assert.deepEqual(
      paged.logs.map((line) => line.text),
      [[all.length, all.length, orderHash(all)].join(" ")],
    );

    for (const [filter, message] of [
      ["{ limit: 0 }", /relations\.list: limit is a whole number from 1 to 20000, not 0/],
      ["{ limit: 20001 }", /limit is a whole number from 1 to 20000, not 20001/],
      ["{ limit: '5' }", /limit is a whole number from 1 to 20000, not "5"/],
      ["{ limit: 5, after: 42 }", /relations\.list: after is a relationId \(a string\), not 42/],
      ["{ limit: 5, after: 'no-such-relation' }", /after names no relation "no-such-relation"/],
      [
        "{ relationKind: 'marker', limit: 5, after: 'large-contain-0' }",
        /after names no marker relation "large-contain-0"; pass the relationId of the last relation of the previous page/,
      ],
    ] as const) {
      const refused = await runEditScript(context, {
        docId: "large",
        replica,
        version: "v",
        script: `relations.list(${filter});`,
      });
      assert.ok(!refused.ok && refused.error.code === "invalid_operation", JSON.stringify(refused));
      assert.match(refused.error.message, message);
    }
  });
});

/** A hash of ids in their order (32-bit FNV-1a, a newline after each id); the scripts above run its source. */
function orderHash(ids: readonly string[]): number {
  let hash = 2166136261;
  for (const id of ids)
    for (const char of `${id}\n`) hash = Math.imul(hash ^ (char.codePointAt(0) ?? 0), 16777619) >>> 0;
  return hash;
}
