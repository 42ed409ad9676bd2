/**
 * `plan-diff` and `revert-plan` through the tool, with two users (issue 25, point 7): the tool's user
 * commits a plan and reads it back as a diff; a revert is a new plan, previewed and committed like any;
 * when another user changed the same field after the plan, the revert is `conflicted` and stores nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { type Harness, musicVolume, startHarness, turnMusicDown } from "./harness.ts";

let harness: Harness;

/** Another user sets the music clip's volume to `volume` and pushes it. */
async function otherUserSetsMusic(docId: string, volume: number) {
  const doc = new LoroDoc();
  await harness.client.pullInto(docId, doc);
  const from = doc.oplogVersion();
  const session = openDocument(doc, timelineSchema);
  const bgm = session.entities.list({ entityKind: "track" }).find((track) => track.payload.role === "bgm")!;
  const held = session.relations
    .of(bgm.entityId, "contain")
    .find((r) => r.endpoint0EntityId === bgm.entityId)!;
  session.entities.update(held.endpoint1EntityId, [{ op: "set", path: ["volume"], value: volume }]);
  doc.commit();
  return await harness.client.push(docId, doc.export({ mode: "update", from }));
}

before(async () => {
  harness = await startHarness();
});
after(async () => {
  await harness.close();
});

describe("plan-diff and revert-plan through the tool: diffs and reverts", () => {
  test("a committed plan reads back as a diff; its revert is a plan that puts the value back", async () => {
    await harness.createDocument("undo");
    const tool = harness.tool();
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "undo",
      script: turnMusicDown,
      auto_commit: true,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    const diff = await tool.handle({ op: "plan-diff", doc_id: "undo", plan_id: run.plan_id });
    assert.ok(diff.ok && diff.op === "plan-diff", JSON.stringify(diff));
    assert.deepEqual(diff.diff.counts, {
      created: 0,
      updated: 1,
      deleted: 0,
      linked: 0,
      moved: 0,
      unlinked: 0,
    });
    assert.deepEqual(
      diff.diff.changes.map((change) => (change.change === "updated" ? change.fields : change)),
      [[{ path: "volume", before: 0, after: -6 }]],
    );

    const revert = await tool.handle({ op: "revert-plan", doc_id: "undo", plan_id: run.plan_id });
    assert.ok(revert.ok && revert.op === "revert-plan", JSON.stringify(revert));
    assert.equal(revert.reverts, run.plan_id);
    assert.notEqual(revert.plan_id, run.plan_id);
    assert.deepEqual(
      revert.preview.changes.map((change) => (change.change === "updated" ? change.fields : change)),
      [[{ path: "volume", before: -6, after: 0 }]],
    );
    assert.equal(musicVolume(await harness.read("undo")), -6, "nothing published before commit-plan");
    const committed = await tool.handle({ op: "commit-plan", doc_id: "undo", plan_id: revert.plan_id });
    assert.ok(
      committed.ok && committed.op === "commit-plan" && committed.status === "committed",
      JSON.stringify(committed),
    );
    assert.equal(musicVolume(await harness.read("undo")), 0);
    // The revert is a plan of its own, with a diff of its own.
    const undone = await tool.handle({ op: "plan-diff", doc_id: "undo", plan_id: revert.plan_id });
    assert.ok(
      undone.ok && undone.op === "plan-diff" && undone.diff.counts.updated === 1,
      JSON.stringify(undone),
    );
  });

  test("a revert after another user changed the same field is conflicted, and nothing is stored", async () => {
    await harness.createDocument("undo-conflict");
    const tool = harness.tool();
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "undo-conflict",
      script: turnMusicDown,
      auto_commit: true,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    assert.equal((await otherUserSetsMusic("undo-conflict", -12)).status, "committed");
    const revert = await tool.handle({
      op: "revert-plan",
      doc_id: "undo-conflict",
      plan_id: run.plan_id,
      auto_commit: true,
    });
    assert.ok(revert.ok && revert.op === "revert-plan", JSON.stringify(revert));
    assert.ok(
      revert.commit?.status === "conflicted" && !revert.commit.applied,
      JSON.stringify(revert.commit),
    );
    assert.ok(
      (revert.commit.reasons as { reason: string; field?: string }[]).some(
        (reason) => reason.reason === "field_changed" && reason.field === "volume",
      ),
      JSON.stringify(revert.commit.reasons),
    );
    assert.equal(musicVolume(await harness.read("undo-conflict")), -12, "the other user's value stays");
  });
});

describe("plan-diff and revert-plan through the tool: previews and missing plans", () => {
  test("a move, then a delete of the track: the preview lists every clip taken off it, by the delete", async () => {
    // The case: the preview said "deleted track-1" while the clips it held left the timeline unreported.
    await harness.createDocument("cascade-preview", 3);
    const tool = harness.tool();
    const before = await harness.read("cascade-preview");
    const trackOf = (role: string) =>
      before.entities.find((entity) => entity.entityKind === "track" && entity.payload.role === role)!
        .entityId;
    const video = trackOf("video");
    const held = before.relations.filter(
      (relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === video,
    );
    const caption = before.relations.find(
      (relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === trackOf("caption"),
    )!;
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "cascade-preview",
      script: `relations.move(${JSON.stringify(caption.relationId)}, { endpoint0EntityId: ${JSON.stringify(video)} });\nentities.delete(${JSON.stringify(video)});`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    const { changes, counts, omitted } = run.preview;
    assert.deepEqual(
      changes.filter((change) => change.change === "deleted").map((change) => change.entityId),
      [video],
    );
    const taken = changes.filter((change) => change.change === "unlinked");
    const expected = [...held, caption].map((relation) => relation.endpoint1EntityId).sort();
    assert.equal(expected.length, 5, "four clips held, and the one moved in");
    assert.deepEqual(taken.map((change) => change.endpoint1EntityId).sort(), expected);
    for (const change of taken) assert.equal(change.by, video, JSON.stringify(change));
    assert.equal(counts.unlinked, 5);
    assert.equal(counts.moved, 0, "the move came to nothing: the clip was taken off with the track");
    assert.equal(omitted, 0);
  });

  test("a plan the history lacks answers not_found", async () => {
    await harness.createDocument("undo-missing");
    const tool = harness.tool();
    for (const op of ["plan-diff", "revert-plan"] as const) {
      const answer = await tool.handle({ op, doc_id: "undo-missing", plan_id: "plan_never" });
      assert.ok(!answer.ok && answer.error.code === "not_found", JSON.stringify(answer));
    }
  });
});
