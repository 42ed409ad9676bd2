/**
 * A run's hooks are bounded: a cap on file reads in flight per run and per host, and uploads staged so
 * that a run whose finish step timed out leaves none stored, counted when the run ends and again once
 * any upload still in flight has landed (here past the test store's latency, 4 s; the hostile bench,
 * `bench/docscript/hostile.ts`, counts a minute later).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import type { UploadedText } from "./host-hooks.ts";
import { maxHookCallsPerHost, maxHookCallsPerRun, runEditScript } from "./run-edit-script.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};

const pool = createEditScriptPool({ size: 1, finishTimeoutMs: 1_500 });
after(() => pool.close());

describe("bounded hooks: uploads of a run that timed out", () => {
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

  it("an upload still in flight when its run ends is discarded when it lands, counted again past the store's latency", async () => {
    // A slow store: each upload takes 4 s, so the finish step (1.5 s) ends with the first still in
    // flight. The horizon is the store's latency plus room (6 s here); the hostile bench counts at 60 s.
    const stored = new Set<string>();
    let began = 0;
    let landed = 0;
    let runEnded = false;
    let landedAfterEnd = 0;
    const hooks = {
      uploadText: async (): Promise<UploadedText> => {
        began++;
        await sleep(4_000);
        landed++;
        if (runEnded) landedAfterEnd++;
        const key = `slow-${landed}`;
        stored.add(key);
        return { system: "files", key, digest: "sha256:s" };
      },
      discardUpload: (_docId: string, upload: UploadedText) => {
        stored.delete(upload.key);
      },
    };
    const script = `const [caption] = entities.list({ entityKind: 'caption' });
for (let index = 0; index < 3; index++) {
  const phonetics = entities.create({ entityKind: 'phonetic-script', payload: { text: 'Hi', phonemeScript: 'h ' + index } });
  relations.link({ relationKind: 'phonetics-of', endpoint0EntityId: phonetics.entityId, endpoint1EntityId: caption.entityId });
}`;
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const result = await runEditScript(
      { pool, schema, hooks },
      { docId: "d", replica, version: "v", script },
    );
    runEnded = true;
    assert.ok(!result.ok, JSON.stringify(result).slice(0, 300));
    assert.equal(result.error.code, "timeout");
    assert.equal(began, 1, "the finish step began its first upload");
    assert.deepEqual([...stored], [], "an upload of the failed run was stored when it ended");
    await sleep(6_000);
    assert.equal(landedAfterEnd, 1, "the upload in flight did not land after the run ended");
    assert.equal(began, 1, "the failed run began another upload after it ended");
    assert.deepEqual([...stored], [], "the upload that landed after the run ended stayed stored");
  });
});

describe("bounded hooks: file reads in flight", () => {
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

  it("refuses the host's 33rd concurrent file read hooks_busy at once, and the host stays responsive", async () => {
    // Runs of many tenants at once, each firing 50 un-awaited reads: the store holds every read it gets.
    const busy = createEditScriptPool({ size: 1, timeoutMs: 120_000 });
    let inFlight = 0;
    let most = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const hooks = {
      loadEntityAsset: async () => {
        inFlight++;
        most = Math.max(most, inFlight);
        await gate;
        inFlight--;
        return { content: "bytes" };
      },
    };
    const script = `const media = entities.list({ entityKind: 'audio' });
const reads = [];
for (let index = 0; index < 50; index++) reads.push(entities.materialize(media[0].entityId).then(() => 'ok', (error) => error.code));
const answers = await Promise.all(reads);
const counts = {};
for (const answer of answers) counts[answer] = (counts[answer] ?? 0) + 1;
console.log(JSON.stringify(counts));`;
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const run = (docId: string, text: string) =>
      runEditScript({ pool: busy, schema, hooks }, { docId, replica, version: "v", script: text });
    const until = async (count: number) => {
      const deadline = performance.now() + underLoadMs(20_000);
      while (inFlight < count) {
        if (performance.now() > deadline) assert.fail(`${inFlight} reads in flight, waiting for ${count}`);
        await sleep(10);
      }
    };
    try {
      // Each run gets its own cap's worth held at the store, until the host's cap is full.
      const holders: ReturnType<typeof run>[] = [];
      for (let index = 1; index * maxHookCallsPerRun <= maxHookCallsPerHost; index++) {
        holders.push(run("busy", script));
        await until(index * maxHookCallsPerRun);
      }
      assert.equal(inFlight, maxHookCallsPerHost);
      // One more tenant: every read it asks is refused at once (those past its own cap in the sandbox,
      // the rest by the host's cap), so its run ends while the store is held.
      const refused = await run("busy", script);
      assert.ok(refused.ok, JSON.stringify(refused).slice(0, 300));
      assert.deepEqual(JSON.parse(refused.logs[0]?.text ?? "{}"), {
        hooks_busy: maxHookCallsPerRun,
        too_many_hook_calls: 50 - maxHookCallsPerRun,
      });
      // The host stays responsive: another document's run is answered while the 32 reads are held.
      const started = performance.now();
      const other = await run("other", "console.log(entities.list({ entityKind: 'track' }).length > 0);");
      assert.ok(other.ok, JSON.stringify(other).slice(0, 300));
      assert.ok(performance.now() - started < underLoadMs(5_000), "another run waited on the held reads");
      assert.equal(most, maxHookCallsPerHost, "more reads than the host's cap reached the store");

      open();
      for (const held of await Promise.all(holders)) {
        assert.ok(held.ok, JSON.stringify(held).slice(0, 300));
        assert.deepEqual(JSON.parse(held.logs[0]?.text ?? "{}"), {
          ok: maxHookCallsPerRun,
          too_many_hook_calls: 50 - maxHookCallsPerRun,
        });
      }
      assert.equal(most, maxHookCallsPerHost);
    } finally {
      open();
      await busy.close();
    }
  });
});
