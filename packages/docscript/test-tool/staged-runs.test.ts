/**
 * A large run hands its update to the document server in parts while its script goes on (ADR 0508):
 * the server takes them, and the run's plan commits as it would without them.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { largeTimeline, largeTimelineRows } from "../test/large-timeline.ts";
import { type Harness, startHarness } from "./harness.ts";

const extraClips = 7_000;
let harness: Harness;

/** A fetch that records the server's answers to parts staged. */
function stagingFetch() {
  const answers: { staged: boolean; reason?: string }[] = [];
  const fetchImpl: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (new URL(url).pathname.endsWith("/stage") && response.ok)
      answers.push((await response.clone().json()) as { staged: boolean; reason?: string });
    return response;
  };
  return { answers, fetchImpl };
}

const shift = `let after;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 0 }, limit: 2000, after });
  if (page.length === 0) break;
  entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: m.payload.startMs + 2000 }] })));
  after = page[page.length - 1].entityId;
}`;

describe("runs that stage their update ahead of its push", { timeout: 900_000 }, () => {
  before(async () => {
    harness = await startHarness();
    await harness.storeDocument("staged", largeTimeline(extraClips).snapshot, largeTimelineRows(extraClips));
  });
  after(async () => {
    await harness.close();
  });

  test("a run of thousands of writes stages them in parts; its plan commits whole", {
    timeout: 600_000,
  }, async () => {
    const { answers, fetchImpl } = stagingFetch();
    const tool = harness.tool({
      fetchImpl,
      requestTimeoutMs: 300_000,
      sandbox: { timeoutMs: 300_000, prepareTimeoutMs: 300_000 },
    });
    const before = await harness.client.entities("staged", { kinds: ["sequence-marker"], limit: 20 });
    const run = await tool.handle({ op: "run-edit-script", doc_id: "staged", script: shift });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
    const markers = run.preview.counts.updated;
    assert.ok(markers > extraClips, `${markers} markers shifted`);
    // Parts of at most 1,000 writes, the last of the run's writes in its push alone.
    assert.ok(answers.length >= 4, `${answers.length} parts`);
    assert.ok(
      answers.every((answer) => answer.staged),
      JSON.stringify(answers.filter((answer) => !answer.staged)),
    );
    const committed = await tool.handle({ op: "commit-plan", doc_id: "staged", plan_id: run.plan_id });
    assert.ok(
      committed.ok && committed.op === "commit-plan" && committed.status === "committed",
      JSON.stringify(committed).slice(0, 400),
    );
    // The plan's id is on its changes (the last of its writes went in a part): the server knows it.
    const state = await harness.client.planState("staged", run.plan_id);
    assert.equal(state.state, "applied");
    const now = await harness.client.entities("staged", { kinds: ["sequence-marker"], limit: 20 });
    assert.deepEqual(
      now.entities.map((marker) => [marker.entityId, marker.payload.startMs]),
      before.entities.map((marker) => [marker.entityId, (marker.payload.startMs as number) + 2000]),
    );
    await tool.close();
  });
});
