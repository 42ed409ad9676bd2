/**
 * A run's host work is done in its document's host worker (ADR 0478): a binding call the host takes
 * long over does not hold the tool's thread, and a run whose host work passes its limit ends at the
 * limit with nothing of it kept; values that cannot cross between threads fail at once, and arguments
 * nested past the bound are refused before anything walks them.
 */
import assert from "node:assert/strict";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { runEditScript } from "./run-edit-script.ts";
import { sessionHostsOf } from "./session-hosts.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};
/** One create the host takes long over: a transcript of 5,000 segments of 1,000 characters, checked and written. */
const bigCreate = `entities.create({ entityKind: 'audio-script', payload: { language: 'en', segments: Array.from({ length: 5000 }, (_, i) => ({ startMs: i, endMs: i + 1, text: 'w'.repeat(1000) })) } });`;

describe("host work in a host worker (ADR 0478)", () => {
  // The worker reports a limit itself (where the script was) well within this grace on a loaded machine.
  const pool = createEditScriptPool({ size: 1, timeoutMs: 120_000, watchdogGraceMs: 5_000 });
  after(() => pool.close());
  const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  const run = (script: string, timeoutMs?: number, hooks = {}) =>
    runEditScript(
      { pool, schema, hooks },
      { docId: "bounds", replica, version: "v", script, ...(timeoutMs === undefined ? {} : { timeoutMs }) },
    );

  it("a long binding call holds neither the tool's thread nor the run past its limit, and leaves nothing", async () => {
    await run("entities.list({ limit: 1 });");
    // What one such call costs the host on this machine now.
    const single = await run(`const started = Date.now(); ${bigCreate} console.log(Date.now() - started);`);
    assert.ok(single.ok, JSON.stringify(single));
    const callMs = Number(single.logs[0]?.text);

    // The tool's thread's delays while a script keeps the host worker busy with such calls. The limit
    // is meant to fall inside a host call; where the script's own part (building the argument and
    // sending it) or the run's opening is what runs at the limit, the host is idle and rightly not
    // stopped, so up to eight limits are tried, each later in the call (past one call too, since the
    // host's checks and writes got faster than the argument's crossing), until one lands inside it.
    // Every try must hold the bounds.
    const stoppedBefore = sessionHostsOf(pool).stats().stopped;
    for (const fraction of [1 / 3, 1 / 2, 2 / 3, 0.8, 0.9, 0.97, 1.2, 1.5]) {
      const delay = monitorEventLoopDelay({ resolution: 10 });
      const limitMs = Math.max(200, Math.round(callMs * fraction));
      delay.enable();
      const started = performance.now();
      const busy = await run(`for (;;) { ${bigCreate} }`, limitMs);
      const tookMs = performance.now() - started;
      delay.disable();
      assert.equal(busy.ok, false);
      assert.equal(!busy.ok && busy.error.code, "timeout", JSON.stringify(busy));
      const worstDelayMs = delay.max / 1e6;
      assert.ok(
        worstDelayMs < Math.max(callMs / 2, 200),
        `the tool's thread was held ${worstDelayMs.toFixed(0)} ms (one call takes ${callMs} ms)`,
      );
      // Generous: the run's opening and the machine's load count too; before, a call ran to its end.
      assert.ok(tookMs < limitMs + 5_000, `the run ended ${tookMs.toFixed(0)} ms after it started`);
      if (sessionHostsOf(pool).stats().stopped > stoppedBefore) break;
    }
    assert.ok(sessionHostsOf(pool).stats().stopped > stoppedBefore, "the busy host worker was not stopped");

    // The next run on the document reads it anew, as it was: nothing of the stopped run is kept.
    const next = await run("console.log(entities.list({ entityKind: 'audio-script' }).length);");
    assert.ok(next.ok, JSON.stringify(next));
    assert.deepEqual(
      next.logs.map((line) => line.text),
      ["0"],
    );
  });

  it("a hook's answer that cannot cross to the script fails the call at once, saying so", async () => {
    const started = performance.now();
    const result = await run(
      `const [audio] = entities.list({ entityKind: 'audio' });
try { await entities.materialize(audio.entityId); } catch (error) { console.log(error.code, error.message); }`,
      60_000,
      { loadEntityAsset: () => ({ content: { read: () => 1 } }) },
    );
    assert.ok(result.ok, JSON.stringify(result));
    assert.match(result.logs[0]?.text ?? "", /^host_call_failed .*cannot cross/);
    assert.ok(performance.now() - started < 30_000, "the call waited instead of failing");
  });

  it("arguments nested past the bound are refused on their text, before any host work", async () => {
    const result = await run(
      `let deep = 'leaf'; for (let i = 0; i < 300; i++) deep = [deep];
try { entities.create({ entityKind: 'track', payload: { role: 'overlay', name: deep } }); } catch (error) { console.log(error.code); }
let shallow = 'leaf'; for (let i = 0; i < 60; i++) shallow = { a: shallow };
try { entities.create({ entityKind: 'track', payload: { role: 'overlay', name: shallow } }); } catch (error) { console.log(error.code); }
console.log(entities.list({ entityKind: 'track' }).length);`,
      60_000,
    );
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(
      result.logs.map((line) => line.text),
      ["arguments_too_deep", "schema_violation", "3"],
    );
  });

  it("a timeout says where the script was and what it had called, none of it kept", async () => {
    const result = await run(
      `entities.create({ entityKind: 'track', payload: { role: 'overlay' } });
entities.list({ limit: 1 });
const step = (value) => value + 1;
for (let spins = 0; ; ) spins = step(spins);`,
      500,
    );
    assert.equal(!result.ok && result.error.code, "timeout", JSON.stringify(result));
    assert.ok(!result.ok);
    // The engine names the place of the script's last call: here the read before the loop.
    assert.match(result.error.message, /\(last seen at line 2, column 10\)/);
    assert.match(result.error.message, /entities\.create ×1/);
    assert.match(result.error.message, /none of it is kept/);
    assert.deepEqual((result.error.data as { calls?: unknown }).calls, {
      "entities.create": 1,
      "entities.list": 1,
    });
  });
});
