/**
 * Every answer a model reads fits its token budget (counted with the real tokenizer), on a document of
 * 100k entities: snapshot pages (plain, filtered, projected, by time, followed by cursor), runs whose
 * preview and logs would be megabytes, a failure listing thousands of issues, and commits.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { defaultBudgets, tokensOf } from "../src/tool/budget.ts";
import type { DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { largeTimeline, largeTimelineRows } from "../test/large-timeline.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
const docId = "budget-100k";
let firstClips: readonly string[] = [];

/** The answer, after checking it fits: a whole answer is at most its op's budget (logs counted apart). */
function fits(result: DocScriptResult, label: string): DocScriptResult {
  const { logs, ...rest } = result as DocScriptResult & { logs?: unknown };
  const budget = !result.ok
    ? defaultBudgets.commit
    : result.op === "snapshot"
      ? defaultBudgets.snapshot
      : result.op === "run-edit-script"
        ? defaultBudgets.run
        : defaultBudgets.commit;
  const tokens = tokensOf(rest);
  assert.ok(tokens <= budget, `${label}: ${tokens} tokens > ${budget}`);
  if (logs !== undefined) {
    const logTokens = tokensOf(logs);
    assert.ok(
      logTokens <= defaultBudgets.logs,
      `${label}: logs ${logTokens} tokens > ${defaultBudgets.logs}`,
    );
  }
  return result;
}

/** Snapshot pages of the large document (plain, projected, related, by time, by id), each within budget. */
async function snapshotPagesFit(): Promise<void> {
  const tool = harness.tool({ sandbox: { timeoutMs: 600_000 } });
  const first = fits(await tool.handle({ op: "snapshot", doc_id: docId }), "first page");
  assert.ok(first.ok && first.op === "snapshot");
  assert.ok(first.total.entities >= 100_000);
  assert.ok(first.entities.length > 0 && first.next_cursor !== undefined);
  assert.equal(first.remaining.entities + first.entities.length, first.matched.entities);
  const second = fits(
    await tool.handle({ op: "snapshot", doc_id: docId, cursor: first.next_cursor }),
    "second page",
  );
  assert.ok(second.ok && second.op === "snapshot");
  const firstIds = first.entities.map((entity) => (entity as { entityId: string }).entityId);
  const secondIds = second.entities.map((entity) => (entity as { entityId: string }).entityId);
  assert.ok(secondIds[0]! > firstIds.at(-1)!, "the next page starts after the last one");

  const clips = fits(
    await tool.handle({
      op: "snapshot",
      doc_id: docId,
      kinds: ["clip"],
      include: "entities",
      fields: ["volume"],
    }),
    "clips, volume only",
  );
  assert.ok(clips.ok && clips.op === "snapshot");
  assert.equal(clips.matched.entities, 33_330 + 3);
  assert.ok(
    clips.entities.every(
      (entity) => Object.keys((entity as { payload: object }).payload).join() === "volume",
    ),
  );

  const held = fits(
    await tool.handle({
      op: "snapshot",
      doc_id: docId,
      related_to: "track-1",
      relation_kinds: ["contain"],
    }),
    "what track-1 holds",
  );
  assert.ok(held.ok && held.op === "snapshot");
  assert.ok(held.matched.relations >= 33_330);
  assert.ok(held.next_cursor !== undefined);

  const window = fits(
    await tool.handle({
      op: "snapshot",
      doc_id: docId,
      from_ms: 5_000_000,
      to_ms: 5_010_000,
      kinds: ["clip"],
    }),
    "clips playing in 10 s",
  );
  assert.ok(window.ok && window.op === "snapshot");
  assert.ok(window.matched.entities >= 10 && window.matched.entities <= 12, JSON.stringify(window.matched));

  const byId = fits(
    await tool.handle({ op: "snapshot", doc_id: docId, ids: [...firstClips] }),
    "ten clips by id",
  );
  assert.ok(byId.ok && byId.op === "snapshot");
  assert.equal(byId.entities.length, 10);
  await tool.close();
}

/**
 * Runs of ten and of thousands of writes, a plan refused with thousands of issues, and a commit, each
 * within its budget.
 */
async function runsAndCommitsFit(): Promise<void> {
  // What is measured is the answers' size: under a loaded machine's minutes-long first push at 100k,
  // the commit still answers committed, not unconfirmed at the default 30 s request deadline.
  const tool = harness.tool({
    requestTimeoutMs: 600_000,
    sandbox: { timeoutMs: 600_000, prepareTimeoutMs: 600_000, memoryLimitMb: 1024 },
  });
  const ten = fits(
    await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `for (const id of ${JSON.stringify(firstClips)}) entities.update(id, [{ op: 'set', path: ['volume'], value: -4 }]);`,
    }),
    "ten writes",
  );
  assert.ok(ten.ok && ten.op === "run-edit-script", JSON.stringify(ten).slice(0, 500));
  assert.equal(ten.preview.changes.length, 10);
  assert.deepEqual((ten.preview.changes[0] as { fields: unknown }).fields, [
    { path: "volume", before: 0, after: -4 },
  ]);
  const committed = fits(
    await tool.handle({ op: "commit-plan", doc_id: docId, plan_id: ten.plan_id }),
    "commit of ten writes",
  );
  assert.ok(committed.ok && committed.op === "commit-plan" && committed.status === "committed");

  // Thousands of writes, a transcript at its bounds (5000 segments of 1000 characters), 5000 log lines.
  const big = fits(
    await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `const clips = entities.list({ entityKind: 'clip', limit: 3000 });
for (const clip of clips) entities.update(clip.entityId, [{ op: 'set', path: ['name'], value: 'n'.repeat(200) }]);
entities.create({ entityKind: 'audio-script', payload: { language: 'en', segments: Array.from({ length: 5000 }, (_, i) => ({ startMs: i, endMs: i + 1, text: 'w'.repeat(1000) })) } });
for (let i = 0; i < 5000; i++) console.log('line ' + i + ' ' + 'x'.repeat(300));`,
    }),
    "3001 writes and 5000 log lines",
  );
  assert.ok(big.ok && big.op === "run-edit-script", JSON.stringify(big).slice(0, 500));
  assert.equal(big.preview.counts.updated, 3000);
  assert.equal(big.preview.counts.created, 1);
  assert.equal(big.preview.changes.length + big.preview.omitted, 3001);
  assert.ok(big.preview.omitted > 0);
  // The sandbox keeps a run's first lines; of those, the answer shows what fits and counts the rest.
  assert.ok((big.logs_omitted ?? 0) > 0 && big.logs.length > 0);

  // A refused plan with thousands of issues: the failure lists some and counts the rest.
  const refused = fits(
    await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `const clips = entities.list({ entityKind: 'clip', limit: 2000 });
for (const clip of clips) { const [c] = relations.of(clip.entityId, 'contain').filter((r) => r.endpoint0EntityId === clip.entityId); relations.unlink(c.relationId); }`,
    }),
    "plan refused with 2000 issues",
  );
  // Refused for the plan's issues (each clip left without its content), not for reading too much.
  assert.ok(!refused.ok && refused.error.code === "runtime", JSON.stringify(refused).slice(0, 500));
  assert.equal((refused.error.data as { cause?: unknown }).cause, "plan_refused");
  assert.match(refused.error.message, /a clip needs its content .*\(and 1997 more\)$/);
  await tool.close();
}

describe("token budgets over a 100k-entity document", { timeout: 1_200_000 }, () => {
  before(async () => {
    harness = await startHarness();
    const built = largeTimeline(33_330);
    assert.ok(built.entityCount >= 100_000);
    firstClips = built.firstClips;
    // Stored with its rows written out (checked equal to a read of the document by
    // large-timeline.test.ts): reading 100k entities to create it took minutes of this suite.
    await harness.storeDocument(docId, built.snapshot, largeTimelineRows(33_330));
    await harness.server.host.snapshot(docId);
  });
  after(async () => {
    await harness.close();
  });

  // Each test gets the suite's deadline: at this size, under load, a test takes minutes.
  test(
    "snapshot pages fit, say how much is left, and their cursors go on",
    { timeout: 1_200_000 },
    snapshotPagesFit,
  );

  test(
    "runs, failures and commits fit: previews are per-write diffs with counts, logs are cut with a count",
    { timeout: 1_200_000 },
    runsAndCommitsFit,
  );
});
