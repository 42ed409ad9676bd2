/**
 * Long-lived workers are replaced between runs once they hold more than their memory bound (ADR 0491):
 * a sandbox worker whose engine memory (WebAssembly, which never shrinks) grew past `recycleAboveMb`,
 * and a host worker whose Loro memory grew past `hostRecycleAboveMb` since it opened its document. The
 * run that grew it is not failed, and the next run works on a fresh worker and reads the document as
 * it is.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { runEditScript } from "./run-edit-script.ts";
import { sessionHostsOf } from "./session-hosts.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};
/** About 2 MB of transcript text in one create: several MB of Loro ops in the run document. */
const bigCreate = `entities.create({ entityKind: 'audio-script', payload: { language: 'en', segments: Array.from({ length: 2000 }, (_, i) => ({ startMs: i, endMs: i + 1, text: 'w'.repeat(1000) })) } });`;

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + underLoadMs(10_000);
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

describe("workers past their memory bound are replaced between runs (ADR 0491)", () => {
  const sandboxBound = createEditScriptPool({ size: 1, recycleAboveMb: 48, timeoutMs: 60_000 });
  const hostBound = createEditScriptPool({ size: 1, hostRecycleAboveMb: 1, timeoutMs: 60_000 });
  after(() => Promise.all([sandboxBound.close(), hostBound.close()]));

  it("a sandbox worker whose engine grew past the bound is replaced, and the next run works", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const run = (script: string) =>
      runEditScript(
        { pool: sandboxBound, schema, hooks: {} },
        { docId: "sandbox-bound", replica, version: "v", script },
      );
    const small = await run("console.log(entities.list({ limit: 1 }).length);");
    assert.ok(small.ok, JSON.stringify(small));
    const before = sandboxBound.stats();
    // A small run leaves the worker under its bound: it stays.
    const again = await run("console.log('small');");
    assert.ok(again.ok, JSON.stringify(again));
    assert.equal(sandboxBound.stats().recycled, before.recycled, "a worker under its bound was replaced");

    // 40 million characters in the engine: its memory grows past 48 MiB and never shrinks.
    const big = await run("const text = 'x'.repeat(40_000_000); console.log(text.length);");
    assert.ok(big.ok, `the run that grew the worker failed: ${JSON.stringify(big).slice(0, 300)}`);
    assert.deepEqual(
      big.logs.map((line) => line.text),
      ["40000000"],
    );
    assert.equal(sandboxBound.stats().recycled, before.recycled + 1, "the grown worker was not replaced");
    assert.ok(sandboxBound.stats().started > before.started, "no fresh worker was started");

    const next = await run("console.log(entities.list({ entityKind: 'track' }).length > 0);");
    assert.ok(next.ok, JSON.stringify(next));
    assert.deepEqual(
      next.logs.map((line) => line.text),
      ["true"],
    );
  });

  it("a host worker whose Loro memory grew past the bound is replaced, and the next run reads the document", async () => {
    const hosts = sessionHostsOf(hostBound);
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const run = (script: string) =>
      runEditScript(
        { pool: hostBound, schema, hooks: {} },
        { docId: "host-bound", replica, version: "v", script },
      );
    const count =
      "console.log(entities.list({ entityKind: 'audio-script' }).length, entities.list({ entityKind: 'track' }).length);";
    const first = await run(count);
    assert.ok(first.ok, JSON.stringify(first));
    const [scripts, tracks] = (first.logs[0]?.text ?? "").split(" ").map(Number);
    const track = await run("entities.create({ entityKind: 'track', payload: { role: 'overlay' } });");
    assert.ok(track.ok, JSON.stringify(track));
    const before = hosts.stats();

    // The create lands in the host worker's run document: its Loro memory grows by several MiB.
    const big = await run(`${bigCreate} console.log('made');`);
    assert.ok(big.ok, `the run that grew the host worker failed: ${JSON.stringify(big).slice(0, 300)}`);
    assert.deepEqual(
      big.logs.map((line) => line.text),
      ["made"],
    );
    await until(() => hosts.stats().recycled > before.recycled, "the grown host worker is replaced");
    assert.equal(
      hosts.stats().stopped,
      before.stopped,
      "a run was stopped: the worker was not replaced between runs",
    );

    // A fresh worker is made ready with the document at once (ADR 0495), before the next run asks.
    await until(() => hosts.stats().prepared > before.prepared, "a fresh host worker holds the document");
    const ready = hosts.stats();
    assert.ok(ready.started > before.started, "no fresh host worker was started");

    // The track's plan is committed meanwhile; the big one is not. The next run opens the document on
    // the prepared worker (the updates since it was made ready) and reads it as it now is.
    replica.import(track.plan.update);
    const next = await run(count);
    assert.ok(next.ok, JSON.stringify(next));
    assert.deepEqual(
      next.logs.map((line) => line.text),
      [`${scripts} ${(tracks ?? 0) + 1}`],
    );
    assert.equal(hosts.stats().started, ready.started, "the next run did not run on the prepared worker");
  });
});

describe("a host worker a committed plan would take past its bound", () => {
  // The default bound (64 MiB): a run's own writes stay under it, a plan of megabytes would not.
  const hostDefault = createEditScriptPool({ size: 1, timeoutMs: 60_000 });
  after(() => hostDefault.close());

  it("a host worker that a committed plan would take past its bound is replaced before it catches up", async () => {
    const hosts = sessionHostsOf(hostDefault);
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const run = (script: string) =>
      runEditScript(
        { pool: hostDefault, schema, hooks: {} },
        { docId: "host-outgrown", replica, version: "v", script },
      );
    const first = await run("console.log(entities.list({ limit: 1 }).length);");
    assert.ok(first.ok, JSON.stringify(first));
    const before = hosts.stats();

    // A plan of a few bytes: the worker keeping the document takes it between runs, as before.
    const small = await run("entities.create({ entityKind: 'track', payload: { role: 'overlay' } });");
    assert.ok(small.ok, JSON.stringify(small));
    replica.import(small.plan.update);
    hosts.replaceOutgrown(replica, small.plan.update.byteLength);
    hosts.catchUp(replica);
    await until(() => hosts.stats().caughtUp > before.caughtUp, "the kept worker catches up");
    assert.equal(hosts.stats().recycled, before.recycled, "a small plan replaced the worker");

    // A plan of ~2 MB would take it past its bound: it is replaced now, its successor reading the
    // replica with the plan in it, and the catch-up after the commit finds nothing to send.
    const big = await run(`${bigCreate} console.log('made');`);
    assert.ok(big.ok, `the big run failed: ${JSON.stringify(big).slice(0, 300)}`);
    const ready = hosts.stats();
    assert.equal(ready.recycled, before.recycled, "the big run's own writes replaced the worker");
    replica.import(big.plan.update);
    hosts.replaceOutgrown(replica, big.plan.update.byteLength);
    // Retired within the caller's turn; its successor is made after it (ADR 0510), so a commit's
    // answer does not wait for a snapshot of the document.
    for (let turn = 0; turn < 10; turn++) await null;
    assert.equal(hosts.stats().recycled, ready.recycled + 1, "the outgrown worker is not retired at once");
    assert.equal(hosts.stats().prepared, ready.prepared, "its successor was made within the caller's turn");
    await until(() => hosts.stats().prepared > ready.prepared, "its successor holds the document");
    hosts.catchUp(replica);
    const next = await run("console.log(entities.list({ entityKind: 'audio-script' }).length);");
    assert.ok(next.ok, JSON.stringify(next));
    const scripts = Number(next.logs[0]?.text);
    assert.ok(scripts >= 1, `the big plan's script is not read (${scripts})`);
    assert.equal(hosts.stats().caughtUp, ready.caughtUp, "the replaced worker was caught up");
    assert.equal(hosts.stats().stopped, ready.stopped, "a run was stopped");
  });
});

describe("a host worker made ready in place of a replaced one", () => {
  const pool = createEditScriptPool({ size: 1, timeoutMs: 60_000 });
  after(() => pool.close());

  it("tells the next run how it reads the document: the run asks the server nothing to decide", async () => {
    const hosts = sessionHostsOf(pool);
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    // The server's rows, as a document too large to read whole: a script that reads nothing asks
    // them only to learn the document's size (a lookup of nothing, answered with the kinds' counts).
    const asked: number[] = [];
    const rows = {
      source: () => async (lookups: readonly unknown[]) => {
        asked.push(lookups.length);
        if (lookups.length > 0) throw new Error("the script reads no rows");
        return { version: "", results: [], counts: { entities: { clip: 100_000 }, relations: {} } };
      },
      aboveEntities: 1000,
    };
    const run = (script: string) =>
      runEditScript(
        { pool, schema, hooks: {}, rows },
        { docId: "host-prepared", replica, version: "v", script },
      );
    const first = await run("console.log('first');");
    assert.ok(first.ok, JSON.stringify(first));
    assert.deepEqual(asked, [0], "the first run learns the document's size");
    const kept = await run("console.log('kept');");
    assert.ok(kept.ok, JSON.stringify(kept));
    assert.deepEqual(asked, [0], "a run on the worker keeping the document asked the server");

    // A plan past the worker's bound is being committed: the worker is replaced, its successor made
    // ready with the document before the next run asks.
    const before = hosts.stats();
    hosts.replaceOutgrown(replica, 1024 ** 3);
    const key = `${String(schema.module)}#${schema.exportName}#host-prepared`;
    await until(() => hosts.stats().prepared > before.prepared, "a fresh host worker takes the document");
    await until(() => hosts.readsOf(key) !== undefined, "the fresh host worker holds the document");
    const next = await run("console.log('prepared');");
    assert.ok(next.ok, JSON.stringify(next));
    assert.equal(
      hosts.stats().started,
      before.started + 1,
      "the next run did not run on the prepared worker",
    );
    assert.deepEqual(asked, [0], "the run on the prepared worker asked the server to decide how to read");
  });
});

describe("a host worker made ready before its first run", () => {
  const pool = createEditScriptPool({ size: 1, timeoutMs: 60_000 });
  after(() => pool.close());

  it("has made Loro's headroom already: its first run's small write grows Loro's memory by nothing", async () => {
    const hosts = sessionHostsOf(pool);
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const key = `${String(schema.module)}#${schema.exportName}#host-headroom`;
    const run = (script: string) =>
      runEditScript({ pool, schema, hooks: {} }, { docId: "host-headroom", replica, version: "v", script });
    const first = await run("console.log(entities.list({ limit: 1 }).length);");
    assert.ok(first.ok, JSON.stringify(first));

    // Replaced (a plan past its bound is being committed): its successor is made ready meanwhile.
    const before = hosts.stats();
    hosts.replaceOutgrown(replica, 1024 ** 3);
    await until(() => hosts.stats().prepared > before.prepared, "a fresh host worker takes the document");
    await until(() => hosts.readsOf(key) !== undefined, "the fresh host worker holds the document");
    const write = await run("entities.create({ entityKind: 'track', payload: { role: 'overlay' } });");
    assert.ok(write.ok, JSON.stringify(write));
    assert.equal(hosts.stats().started, before.started + 1, "the write did not run on the prepared worker");
    await until(() => hosts.grownOf(key) !== undefined, "the worker says what its first run grew");
    assert.equal(hosts.grownOf(key), 0, "the first run grew Loro's memory (the headroom was made in it)");
  });
});
