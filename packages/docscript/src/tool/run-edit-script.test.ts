import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { runEditScript } from "./run-edit-script.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};
const countTracks = "console.log(entities.list({ entityKind: 'track' }).length);";

describe("runEditScript on a warm worker (ADR 0450)", () => {
  const pool = createEditScriptPool({ size: 1 });
  after(() => pool.close());

  it("reads a snapshot once, then serves the same version from the worker, then only the updates since", async () => {
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
