/**
 * A large run hands its update to the document server in parts while its script goes on (ADR 0508):
 * the server takes them, and the run's plan commits as it would without them. The runs stage for as
 * long as they run (`sandbox.stageForMs`), so a loaded machine that slows the script does not end the
 * staging before its first part; a run told to stage for no time stages nothing and commits alike.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { largeTimeline, largeTimelineRows } from "../test/large-timeline.ts";
import { type Harness, startHarness } from "./harness.ts";

const extraClips = 7_000;
/** What the server answers a part that came ahead of an earlier one of its run (ADR 0508). */
const outOfOrder = [
  "the part does not follow the staged ones",
  "the part depends on changes the server does not hold",
];
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
    const { snapshot } = largeTimeline(extraClips);
    const rows = largeTimelineRows(extraClips);
    await harness.storeDocument("staged", snapshot, rows);
    await harness.storeDocument("unstaged", snapshot, rows);
  });
  after(async () => {
    await harness.close();
  });

  /** Runs the shift through a tool staging for `stageForMs`; its parts' answers, once committed. */
  async function shiftCommitted(docId: string, stageForMs: number) {
    const { answers, fetchImpl } = stagingFetch();
    const tool = harness.tool({
      fetchImpl,
      requestTimeoutMs: 300_000,
      sandbox: { timeoutMs: 300_000, prepareTimeoutMs: 300_000, stageForMs },
    });
    try {
      const before = await harness.client.entities(docId, { kinds: ["sequence-marker"], limit: 20 });
      const run = await tool.handle({ op: "run-edit-script", doc_id: docId, script: shift });
      assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
      const markers = run.preview.counts.updated;
      assert.ok(markers > extraClips, `${markers} markers shifted`);
      const committed = await tool.handle({ op: "commit-plan", doc_id: docId, plan_id: run.plan_id });
      assert.ok(
        committed.ok && committed.op === "commit-plan" && committed.status === "committed",
        JSON.stringify(committed).slice(0, 400),
      );
      // The plan's id is on its changes (the last of its writes may have gone in a part): the server knows it.
      const state = await harness.client.planState(docId, run.plan_id);
      assert.equal(state.state, "applied");
      const now = await harness.client.entities(docId, { kinds: ["sequence-marker"], limit: 20 });
      assert.deepEqual(
        now.entities.map((marker) => [marker.entityId, marker.payload.startMs]),
        before.entities.map((marker) => [marker.entityId, (marker.payload.startMs as number) + 2000]),
      );
      return answers;
    } finally {
      await tool.close();
    }
  }

  test("a run of thousands of writes stages them in parts; its plan commits whole", {
    timeout: 600_000,
  }, async () => {
    // Staging for the whole run (its limit): however slow the machine, every part of its writes is sent.
    const answers = await shiftCommitted("staged", 300_000);
    // Parts of at most 500 writes (over 7,000 in all), the last of the run's writes in its push alone.
    const staged = answers.filter((answer) => answer.staged);
    const refused = answers.filter((answer) => !answer.staged);
    // On a loaded machine a part may overtake the one before it by more than the server waits for it:
    // refused as out of order, it ends the run's staging and the rest goes with the push. Nothing else.
    assert.ok(
      refused.every((answer) => outOfOrder.includes(answer.reason ?? "")),
      JSON.stringify(refused),
    );
    assert.ok(
      staged.length >= (refused.length === 0 ? 4 : 1),
      `${staged.length} parts staged of ${answers.length}`,
    );
  });

  test("a run told to stage for no time sends no part; its plan commits whole", {
    timeout: 600_000,
  }, async () => {
    const answers = await shiftCommitted("unstaged", 0);
    assert.equal(answers.length, 0, `${answers.length} parts`);
  });
});
