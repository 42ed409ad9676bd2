/**
 * A run's hooks are bounded: a cap on file reads in flight per run, and uploads staged so that a run
 * whose finish step timed out leaves none stored, counted when the run ends and again later.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import type { UploadedText } from "./host-hooks.ts";
import { maxHookCallsPerRun, runEditScript } from "./run-edit-script.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};

describe("bounded hooks", () => {
  const pool = createEditScriptPool({ size: 1, finishTimeoutMs: 1_500 });
  after(() => pool.close());

  it("uploads of a run whose finish timed out are all discarded, also those stored after it ended", async () => {
    const stored = new Set<string>();
    let made = 0;
    const hooks = {
      uploadText: async (_docId: string, _text: string): Promise<UploadedText> => {
        await sleep(300);
        const key = `phonemes-${++made}`;
        stored.add(key);
        return { system: "files", key, digest: "sha256:p" };
      },
      discardUpload: (_docId: string, upload: UploadedText) => {
        stored.delete(upload.key);
      },
    };
    // Twenty phoneme texts: storing them takes 6 s, four times the finish step's limit.
    const script = `const [caption] = entities.list({ entityKind: 'caption' });
for (let index = 0; index < 20; index++) {
  const phonetics = entities.create({ entityKind: 'phonetic-script', payload: { text: 'Hi', phonemeScript: 'h ' + index } });
  relations.link({ relationKind: 'phonetics-of', endpoint0EntityId: phonetics.entityId, endpoint1EntityId: caption.entityId });
}`;
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const result = await runEditScript(
      { pool, schema, hooks },
      { docId: "d", replica, version: "v", script },
    );
    assert.ok(!result.ok, JSON.stringify(result).slice(0, 300));
    assert.equal(result.error.code, "timeout");
    assert.ok(made >= 1, "the finish step began uploading");
    await sleep(1_000);
    assert.deepEqual([...stored], [], "an upload of the failed run stayed stored (at its end)");
    const count = made;
    await sleep(2_000);
    assert.equal(made, count, "the failed run kept uploading after it ended");
    assert.deepEqual([...stored], [], "an upload of the failed run stayed stored (later)");
  });

  it("refuses a run's file read past the cap at once, never queueing it", async () => {
    let inFlight = 0;
    let most = 0;
    const hooks = {
      loadEntityAsset: async () => {
        inFlight++;
        most = Math.max(most, inFlight);
        await sleep(200);
        inFlight--;
        return { content: "bytes" };
      },
    };
    const script = `const media = entities.list({ entityKind: 'audio' });
const reads = [];
for (let index = 0; index < 1000; index++) reads.push(entities.materialize(media[0].entityId).then(() => 'ok', (error) => error.code));
const answers = await Promise.all(reads);
console.log(answers.filter((answer) => answer === 'ok').length, answers.filter((answer) => answer === 'too_many_hook_calls').length);`;
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const result = await runEditScript(
      { pool, schema, hooks },
      { docId: "d", replica, version: "v", script },
    );
    assert.ok(result.ok, JSON.stringify(result).slice(0, 300));
    assert.ok(most <= maxHookCallsPerRun, `${most} reads in flight`);
    const [ok, refused] = (result.logs[0]?.text ?? "").split(" ").map(Number);
    assert.equal((ok ?? 0) + (refused ?? 0), 1000);
    assert.ok((refused ?? 0) >= 1000 - 10 * maxHookCallsPerRun, result.logs[0]?.text);
  });
});
