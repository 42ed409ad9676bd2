/**
 * A run's host work is held to the bytes it may retain (ADR 0490): a legal script whose writes, plan
 * or uploads make its host worker keep more than the run's limit fails `memory_limit`, nothing of it is
 * kept or stays stored, and the document's next run reads it as it was. The same script under the
 * default limit does not fail.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { retainedBudget } from "./host-retained.ts";
import { runEditScript } from "./run-edit-script.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};
/** About 2 MB of transcript text in one create: its ops, overlay and plan are several MB on the host. */
const bigCreate = `entities.create({ entityKind: 'audio-script', payload: { language: 'en', segments: Array.from({ length: 2000 }, (_, i) => ({ startMs: i, endMs: i + 1, text: 'w'.repeat(1000) })) } });`;
/** Four uploads of 200,000 characters (400 KB each as UTF-8). */
const uploads = `const [caption] = entities.list({ entityKind: 'caption' });
for (let i = 0; i < 4; i++) {
  const phonetics = entities.create({ entityKind: 'phonetic-script', payload: { text: 'Hello', phonemeScript: 'ə'.repeat(200000) } });
  relations.link({ relationKind: 'phonetics-of', endpoint0EntityId: phonetics.entityId, endpoint1EntityId: caption.entityId });
}`;

describe("a run's retained bytes on the host (ADR 0490)", () => {
  it("counts what a run hands on, and never garbage", () => {
    const handed = retainedBudget(2 ** 20);
    handed.charge(2 ** 19);
    assert.equal(handed.over(), false);
    handed.charge(2 ** 20);
    assert.equal(handed.over(), true);
    assert.equal(handed.failure().code, "memory_limit");
    // Garbage of several times the limit, dropped before the check: the collection finds it gone.
    const budget = retainedBudget(2 ** 20);
    let junk: unknown[] | undefined = Array.from({ length: 200_000 }, (_, index) => ({ index }));
    assert.equal(junk.length, 200_000);
    junk = undefined;
    assert.equal(budget.over(), false);
  });

  it("credits what reading the document's rows grows, up to the limit (ADR 0481)", async () => {
    const budget = retainedBudget(2 ** 20);
    // Rows read for the document (a fill of rows on demand) and kept: the document's, not the run's.
    const held = await budget.reading(async () => Array.from({ length: 20_000 }, (_, index) => ({ index })));
    assert.equal(held.length, 20_000);
    assert.equal(budget.over(), false);
    // What the run keeps itself is charged as before: the credit is no more than the limit.
    budget.charge(2 ** 21);
    assert.equal(budget.over(), true);
    const reads = retainedBudget(2 ** 20);
    await reads.reading(async () => {
      reads.charge(0);
    });
    reads.charge(2 ** 20 + 2 ** 19);
    assert.equal(reads.over(), true);
  });

  const small = createEditScriptPool({ size: 1, timeoutMs: 120_000, runRetainedMb: 1 });
  const roomy = createEditScriptPool({ size: 1, timeoutMs: 120_000 });
  after(() => Promise.all([small.close(), roomy.close()]));
  const stored = new Map<string, string>();
  let nextKey = 1;
  const hooks = {
    uploadText: (_docId: string, text: string) => {
      const key = `h24-upload-${nextKey++}`;
      stored.set(key, text);
      return { system: "files", key, digest: "sha256:h24" };
    },
    discardUpload: (_docId: string, upload: { key: string }) => {
      stored.delete(upload.key);
    },
  };
  const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  const run = (pool: ReturnType<typeof createEditScriptPool>, script: string) =>
    runEditScript(
      { pool, schema, hooks },
      { docId: "retained", replica, version: "v", script, timeoutMs: 60_000 },
    );

  it("a large create past the run's limit fails memory_limit, and nothing of it is kept", async () => {
    const fine = await run(small, "entities.create({ entityKind: 'track', payload: { role: 'overlay' } });");
    assert.ok(fine.ok, JSON.stringify(fine));

    const big = await run(small, `${bigCreate} console.log('went on');`);
    assert.equal(!big.ok && big.error.code, "memory_limit", JSON.stringify(big).slice(0, 500));
    assert.match(!big.ok ? big.error.message : "", /retained more than its limit of 1 MiB/);

    // The document's next run reads it as it was.
    const next = await run(small, "console.log(entities.list({ entityKind: 'audio-script' }).length);");
    assert.ok(next.ok, JSON.stringify(next));
    assert.deepEqual(
      next.logs.map((line) => line.text),
      ["0"],
    );
    // Under the default limit the same create is a plan.
    const roomyRun = await run(roomy, bigCreate);
    assert.ok(roomyRun.ok, JSON.stringify(roomyRun).slice(0, 500));
  });

  it("a script that catches the failure still fails memory_limit: only the host gives the code", async () => {
    const caught = await run(
      small,
      `try { ${bigCreate} } catch (error) { console.log('caught', error.code); }
for (;;) entities.list({ limit: 1 });`,
    );
    assert.equal(!caught.ok && caught.error.code, "memory_limit", JSON.stringify(caught).slice(0, 500));
  });

  it("uploads count: a run whose uploads pass its limit fails memory_limit, and none stays stored", async () => {
    const before = stored.size;
    const result = await run(small, uploads);
    assert.equal(!result.ok && result.error.code, "memory_limit", JSON.stringify(result).slice(0, 500));
    assert.equal(stored.size, before, "an upload of the failed run stayed stored");
  });
});
