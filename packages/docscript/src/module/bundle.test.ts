import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet, silentLogger } from "@tackle/core";
import docscriptBundle, { sampleDocumentId } from "./bundle.ts";

test("the docscript module serves a sample timeline the console can snapshot, script and commit", async () => {
  const bundle = await docscriptBundle({
    module: "docscript",
    node: "test-node",
    env: {},
    logger: silentLogger,
  });
  try {
    const tools = createToolSet(bundle.tools);
    assert.deepEqual(tools.tools.map((tool) => tool.name).sort(), ["context", "edit"]);
    const context = await tools.call("context", {});
    assert.ok(context.ok);
    assert.match((context.output as { prompt: string }).prompt, /declare const entities/);
    const script = `const bgm = entities.list().find((e) => e.entityKind === 'track' && e.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
entities.update(held.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: -6 }]);`;
    const run = await tools.call("edit", { op: "run-edit-script", doc_id: sampleDocumentId, script });
    assert.ok(run.ok, JSON.stringify(run));
    const planId = (run.output as { plan_id: string }).plan_id;
    const commit = await tools.call("edit", { op: "commit-plan", doc_id: sampleDocumentId, plan_id: planId });
    assert.ok(commit.ok);
    assert.equal((commit.output as { status: string }).status, "committed");
    const snapshot = await tools.call("edit", { op: "snapshot", doc_id: sampleDocumentId });
    assert.ok(snapshot.ok);
    const volumes = (
      snapshot.output as unknown as { entities: { entityKind: string; payload: { volume?: number } }[] }
    ).entities
      .filter((entity) => entity.entityKind === "clip")
      .map((entity) => entity.payload.volume);
    assert.ok(volumes.includes(-6));
    const changed = await tools.call("context", { context_id: "console" });
    assert.ok(changed.ok);
    assert.equal((changed.output as { changed: boolean | null }).changed, true);
    // A failed call is a failed call (so MCP marks it isError), carrying the tool's code and the logs.
    const failed = await tools.call("edit", {
      op: "run-edit-script",
      doc_id: sampleDocumentId,
      script: "console.log('before'); entities.update('no-such-entity', []);",
    });
    assert.equal(failed.ok, false);
    assert.ok(!failed.ok);
    assert.equal(failed.error.code, "runtime");
    assert.deepEqual((failed.error.data as { op: string; logs: unknown[] }).op, "run-edit-script");
    assert.deepEqual((failed.error.data as { logs: unknown[] }).logs, [{ level: "log", text: "before" }]);
    const missing = await tools.call("edit", {
      op: "commit-plan",
      doc_id: sampleDocumentId,
      plan_id: "plan_never",
    });
    assert.ok(!missing.ok);
    assert.equal(missing.error.code, "plan_not_found");
  } finally {
    await bundle.close();
  }
});
