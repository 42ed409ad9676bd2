/** The tool end to end against a real document server: the reference example, the prompt, serialization. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { countTokens } from "@tackle/core/tokens";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import type { DocScriptTool } from "../src/tool/create-doc-script-tool.ts";
import { describeSchema } from "../src/tool/describe-schema.ts";
import { promptBudget, workedScripts } from "../src/tool/prompt.ts";
import { scriptContract } from "../src/tool/script-contract.ts";
import { type Harness, musicVolume, startHarness, turnMusicDown } from "./harness.ts";

let harness: Harness;

before(async () => {
  harness = await startHarness();
});
after(async () => {
  await harness.close();
});

describe("docscript tool against a real document server: previews, commits, snapshots", () => {
  test("a preview lists what a delete takes with it: the clips taken off a deleted track, a clip's marker", async () => {
    await harness.createDocument("cascades", 3);
    const tool = harness.tool();
    const before = await harness.read("cascades");
    const video = before.entities.find(
      (entity) => entity.entityKind === "track" && entity.payload.role === "video",
    )!;
    const held = before.relations.filter(
      (relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === video.entityId,
    );
    assert.ok(held.length >= 3, JSON.stringify(held));
    const [first] = held;
    const marker = before.relations.find(
      (relation) =>
        relation.relationKind === "marker" && relation.endpoint0EntityId === first!.endpoint1EntityId,
    )!;
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "cascades",
      script: `entities.delete(${JSON.stringify(first!.endpoint1EntityId)});\nentities.delete(${JSON.stringify(video.entityId)});`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    const { changes, counts } = run.preview;
    const deleted = changes.filter((change) => change.change === "deleted").map((change) => change.entityId);
    assert.deepEqual(
      new Set(deleted),
      new Set([first!.endpoint1EntityId, marker.endpoint1EntityId, video.entityId]),
      "the clip, the marker in its row, and the track",
    );
    const taken = changes.filter((change) => change.change === "unlinked");
    // Every clip the track held is listed as taken off it, by the track's delete.
    for (const relation of held.slice(1))
      assert.ok(
        taken.some(
          (change) =>
            change.relationId === relation.relationId &&
            change.by === video.entityId &&
            change.endpoint1EntityId === relation.endpoint1EntityId,
        ),
        `${relation.endpoint1EntityId} taken off the track: ${JSON.stringify(taken)}`,
      );
    assert.ok(
      taken.some(
        (change) => change.relationId === first!.relationId && change.by === first!.endpoint1EntityId,
      ),
    );
    assert.equal(counts.unlinked, taken.length + run.preview.omitted);
    assert.equal(counts.deleted, 3);
  });

  test("the reference example script runs as written and commits; the server has the change", async () => {
    await harness.createDocument("example");
    const tool = harness.tool();
    assert.equal(musicVolume(await harness.read("example")), 0);
    const run = await tool.handle({ op: "run-edit-script", doc_id: "example", script: turnMusicDown });
    assert.equal(run.ok, true, JSON.stringify(run));
    assert.ok(run.ok && run.op === "run-edit-script");
    assert.equal(run.preview.counts.updated, 1);
    assert.deepEqual(run.preview.changes, [
      {
        change: "updated",
        entityId: run.preview.changes[0]?.change === "updated" ? run.preview.changes[0].entityId : "",
        entityKind: "clip",
        fields: [{ path: "volume", before: 0, after: -6 }],
      },
    ]);
    assert.equal(musicVolume(await harness.read("example")), 0, "nothing is published before commit-plan");
    const committed = await tool.handle({ op: "commit-plan", doc_id: "example", plan_id: run.plan_id });
    assert.equal(
      committed.ok && committed.op === "commit-plan" && committed.status,
      "committed",
      JSON.stringify(committed),
    );
    assert.equal(musicVolume(await harness.read("example")), -6);
    const again = await tool.handle({ op: "commit-plan", doc_id: "example", plan_id: run.plan_id });
    assert.equal(again.ok && again.op === "commit-plan" && again.status, "committed");
  });

  test("snapshot returns entities, relations and the version, and never changes the document", async () => {
    await harness.createDocument("snapshot", 120);
    const tool = harness.tool();
    const first = await tool.handle({ op: "snapshot", doc_id: "snapshot" });
    assert.ok(first.ok && first.op === "snapshot");
    assert.equal(first.total.entities, 3 * 3 + 3 + 120 * 3);
    assert.ok(first.entities.length > 10 && first.entities.length < first.total.entities);
    assert.equal(first.remaining.entities, first.total.entities - first.entities.length);
    assert.ok(first.next_cursor !== undefined, "a cut page says where to go on");
    const second = await tool.handle({ op: "snapshot", doc_id: "snapshot" });
    assert.ok(second.ok && second.op === "snapshot");
    assert.equal(second.version, first.version);
  });
});

describe("docscript tool against a real document server: the prompt and its scripts", () => {
  test("the prompt carries the contract verbatim and says whether the document changed", async () => {
    await harness.createDocument("prompt");
    const tool = harness.tool();
    assert.equal(tool.name, "docscript");
    assert.deepEqual(
      (tool.inputJsonSchema as { properties: { op: { enum: string[] } } }).properties.op.enum,
      ["snapshot", "run-edit-script", "commit-plan", "plan-diff", "revert-plan"],
    );
    assert.deepEqual((tool.inputJsonSchema as { required: string[] }).required, ["op", "doc_id"]);
    const first = await tool.getModelContext({ doc_id: "prompt", context_id: "conversation-1" });
    assert.equal(first.changed, null);
    assert.ok(first.prompt.includes(scriptContract));
    assert.ok(
      first.prompt.includes(describeSchema(timelineSchema)),
      "the prompt states the document's schema",
    );
    assert.match(first.prompt, /run-edit-script/);
    const tokens = countTokens(first.prompt);
    assert.ok(tokens <= promptBudget, `the timeline's prompt takes ${tokens} tokens`);
    const second = await tool.getModelContext({ doc_id: "prompt", context_id: "conversation-1" });
    assert.equal(second.changed, false);
    const other = harness.tool();
    const run = await other.handle({
      op: "run-edit-script",
      doc_id: "prompt",
      script: turnMusicDown,
      auto_commit: true,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    const third = await tool.getModelContext({ doc_id: "prompt", context_id: "conversation-1" });
    assert.equal(third.changed, true);
    assert.match(third.prompt, /CHANGED/);
    assert.equal(
      (await tool.getModelContext({ doc_id: "prompt", context_id: "conversation-2" })).changed,
      null,
    );
  });

  test("every worked script in the prompt runs and commits on the sample timeline", async () => {
    const tool = harness.tool();
    for (const [index, example] of workedScripts.entries()) {
      await harness.createDocument(`worked-${index}`);
      const run = await tool.handle({
        op: "run-edit-script",
        doc_id: `worked-${index}`,
        script: example.script,
        auto_commit: true,
      });
      assert.ok(run.ok && run.op === "run-edit-script", `${example.title}: ${JSON.stringify(run)}`);
      assert.equal(run.commit?.status, "committed", example.title);
    }
    const last = `worked-${workedScripts.length - 1}`;
    const read = (await harness.tool().handle({ op: "snapshot", doc_id: last })) as { ok: boolean };
    assert.equal(read.ok, true);
  });
});

describe("docscript tool against a real document server: what each run reads", () => {
  test("concurrent calls on one document run one at a time: each script reads the previous commit", async () => {
    await harness.createDocument("serial");
    const tool = harness.tool({ sandbox: { workers: 2 } });
    const lower = `const bgm = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
const clip = entities.get(held.endpoint1EntityId);
entities.update(clip.entityId, [{ op: 'set', path: ['volume'], value: clip.payload.volume - 1 }]);`;
    const results = await Promise.all(
      Array.from({ length: 4 }, () =>
        tool.handle({ op: "run-edit-script", doc_id: "serial", script: lower, auto_commit: true }),
      ),
    );
    for (const result of results)
      assert.ok(
        result.ok && result.op === "run-edit-script" && result.commit?.status === "committed",
        JSON.stringify(result),
      );
    assert.equal(musicVolume(await harness.read("serial")), -4);
  });

  test("every call first pulls: a script reads what another user pushed a moment before", async () => {
    await harness.createDocument("pulls");
    const tool = harness.tool();
    const read = `const bgm = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
console.log(entities.get(held.endpoint1EntityId).payload.volume);`;
    const before = await tool.handle({ op: "run-edit-script", doc_id: "pulls", script: read });
    assert.deepEqual(before.ok && before.op === "run-edit-script" && before.logs.map((line) => line.text), [
      "0",
    ]);
    const other = harness.tool({ userId: "someone-else" });
    const pushed = await other.handle({
      op: "run-edit-script",
      doc_id: "pulls",
      script: turnMusicDown,
      auto_commit: true,
    });
    assert.ok(pushed.ok && pushed.op === "run-edit-script" && pushed.commit?.status === "committed");
    const after = await tool.handle({ op: "run-edit-script", doc_id: "pulls", script: read });
    assert.deepEqual(after.ok && after.op === "run-edit-script" && after.logs.map((line) => line.text), [
      "-6",
    ]);
  });

  test("a warm worker's kept document is never stale or written: each run reads exactly what the server has", async () => {
    await harness.createDocument("kept");
    const tool = harness.tool({ sandbox: { workers: 1 } });
    const music = `const bgm = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
const clipId = held.endpoint1EntityId;`;
    const read = `${music}
console.log(entities.get(clipId).payload.volume, entities.list({ entityKind: 'track' }).length, entities.list({ entityKind: 'clip' }).length);`;
    const logsOf = async (script: string) => {
      const result = await tool.handle({ op: "run-edit-script", doc_id: "kept", script });
      assert.ok(result.ok && result.op === "run-edit-script", JSON.stringify(result));
      return result.logs.map((line) => line.text);
    };
    assert.deepEqual(await logsOf(read), ["0 3 3"]);
    // A plan never published, a refused write, a changed read: none of it reaches the next run.
    const written = await logsOf(`${music}
entities.update(clipId, [{ op: 'set', path: ['volume'], value: -20 }]);
entities.create({ entityKind: 'track', payload: { role: 'overlay' } });
try { entities.update(clipId, [{ op: 'set', path: ['volume'], value: 'loud' }]); } catch (error) { console.log(error.code); }
entities.get(clipId).payload.volume = 99;
console.log(entities.get(clipId).payload.volume);`);
    assert.deepEqual(written, ["schema_violation", "-20"]);
    assert.deepEqual(await logsOf(read), ["0 3 3"]);
    // A script that fails after writing, and a plan refused as a whole, leave nothing either.
    const failed = await tool.handle({
      op: "run-edit-script",
      doc_id: "kept",
      script: `${music}\nentities.update(clipId, [{ op: 'set', path: ['volume'], value: -30 }]);\nthrow new Error('changed my mind');`,
    });
    assert.equal(failed.ok, false);
    const refusedPlan = await tool.handle({
      op: "run-edit-script",
      doc_id: "kept",
      script: "entities.create({ entityKind: 'clip' });",
    });
    assert.ok(!refusedPlan.ok && refusedPlan.error.code === "runtime", JSON.stringify(refusedPlan));
    assert.deepEqual(await logsOf(read), ["0 3 3"]);
    // Another user's commit is seen by the next run; so is the tool's own.
    const other = new LoroDoc();
    await harness.client.pullInto("kept", other);
    const pulled = other.oplogVersion();
    const session = openDocument(other, timelineSchema);
    const bgm = session.entities.list({ entityKind: "track" }).find((track) => track.payload.role === "bgm")!;
    const [held] = session.relations.of(bgm.entityId, "contain");
    session.entities.update(held!.endpoint1EntityId, [{ op: "set", path: ["volume"], value: -9 }]);
    session.entities.create({ entityKind: "track", payload: { role: "overlay", name: "Theirs" } });
    other.commit();
    assert.equal(
      (await harness.client.push("kept", other.export({ mode: "update", from: pulled }))).status,
      "committed",
    );
    assert.deepEqual(await logsOf(read), ["-9 4 3"]);
    const own = await tool.handle({
      op: "run-edit-script",
      doc_id: "kept",
      script: `${music}\nentities.update(clipId, [{ op: 'set', path: ['volume'], value: -3 }]);`,
      auto_commit: true,
    });
    assert.ok(
      own.ok && own.op === "run-edit-script" && own.commit?.status === "committed",
      JSON.stringify(own),
    );
    assert.deepEqual(await logsOf(read), ["-3 4 3"]);
  });
});

describe("docscript tool against a real document server: deadlines and failures", () => {
  test("timeout_ms counts from the script's start: a cold worker and a document load do not eat it", async () => {
    await harness.createDocument("cold-timeout", 300);
    const run = (tool: DocScriptTool, timeoutMs?: number) =>
      tool.handle({
        op: "run-edit-script",
        doc_id: "cold-timeout",
        script: turnMusicDown,
        ...(timeoutMs === undefined ? {} : { timeout_ms: timeoutMs }),
      });
    // The script's own time on this machine now, bounded from above by a warm tool's whole call (its
    // worker booted, its replica pulled): the limit is four times that, and 250 ms at least (scaled by
    // the load: the cold worker's script waits for a core the warm one did not). A loaded
    // machine slows the script itself; that is not what this test checks.
    const warm = harness.tool();
    const first = await run(warm);
    assert.ok(first.ok, JSON.stringify(first));
    const measured = performance.now();
    const again = await run(warm);
    assert.ok(again.ok, JSON.stringify(again));
    const timeoutMs = Math.max(underLoadMs(250), Math.ceil(4 * (performance.now() - measured)));
    // The document's first read answers later than that limit: the call as a whole outlasts the
    // script's limit by itself, so the run only succeeds if that limit counts from the script's start.
    const delayMs = timeoutMs + 150;
    let delayed = false;
    const slowFirstRead: typeof fetch = async (input, init) => {
      if (!delayed) {
        delayed = true;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      return fetch(input, init);
    };
    const cold = harness.tool({ sandbox: { workers: 0 }, fetchImpl: slowFirstRead });
    const started = performance.now();
    const answer = await run(cold, timeoutMs);
    const elapsed = performance.now() - started;
    assert.ok(delayed, "the tool read the document through its fetch");
    assert.ok(
      answer.ok && answer.op === "run-edit-script",
      `limit ${timeoutMs} ms: ${JSON.stringify(answer)}`,
    );
    assert.ok(elapsed > delayMs, `the whole call took ${elapsed} ms, more than the script's limit`);
  });

  test("a script's failures come back as data: refused write, runtime error, timeout, unknown plan, bad input", async () => {
    await harness.createDocument("failures");
    const tool = harness.tool();
    const refused = await tool.handle({
      op: "run-edit-script",
      doc_id: "failures",
      script: `const [music] = entities.list({ entityKind: 'audio' }); entities.update(music.entityId, [{ op: 'set', path: ['storageKey'], value: 'x' }]);`,
    });
    assert.ok(!refused.ok);
    assert.equal(refused.error.code, "runtime");
    assert.match(refused.error.message, /storageKey/);
    const timeout = await tool.handle({
      op: "run-edit-script",
      doc_id: "failures",
      script: "while (true) {}",
      timeout_ms: 200,
    });
    assert.ok(!timeout.ok);
    assert.equal(timeout.error.code, "timeout");
    const plan = await tool.handle({ op: "commit-plan", doc_id: "failures", plan_id: "plan_nope" });
    assert.ok(!plan.ok);
    assert.equal(plan.error.code, "not_found");
    assert.deepEqual(plan.error.data, { resource: "plan", id: "plan_nope" });
    const bad = await tool.handle({ op: "rewrite", doc_id: "failures" });
    assert.ok(!bad.ok);
    assert.equal(bad.error.code, "invalid_input");
    const missing = await tool.handle({ op: "snapshot", doc_id: "no-such-document" });
    assert.ok(!missing.ok);
    assert.equal(missing.error.code, "not_found");
    assert.equal((missing.error.data as { resource?: unknown }).resource, "document");
    const incomplete = await tool.handle({
      op: "run-edit-script",
      doc_id: "failures",
      script: `entities.create({ entityKind: 'clip' }); console.log('made a clip without marker or content');`,
    });
    assert.ok(!incomplete.ok);
    assert.equal(incomplete.error.code, "runtime");
    assert.match(incomplete.error.message, /slot|marker|content/);
    assert.deepEqual(
      incomplete.logs?.map((line) => line.text),
      ["made a clip without marker or content"],
    );
    assert.equal(musicVolume(await harness.read("failures")), 0);
  });
});
