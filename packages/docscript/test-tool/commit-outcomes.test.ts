/** The four ways a commit ends, each produced by a real server (and, for `unconfirmed`, a lost answer). */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { type Harness, musicVolume, startHarness, turnMusicDown } from "./harness.ts";

let harness: Harness;

/** Appends "!" to the sample's caption: applied twice, it would read "Hello!!". */
const exclaim = `const [caption] = entities.list({ entityKind: 'caption' });
entities.update(caption.entityId, [{ op: 'splice', path: ['text'], index: caption.payload.text.length, insert: '!' }]);`;

function captionText(document: Awaited<ReturnType<Harness["read"]>>): unknown {
  return document.entities.find((entity) => entity.entityKind === "caption")?.payload.text;
}

before(async () => {
  harness = await startHarness();
});
after(async () => {
  await harness.close();
});

describe("commit outcomes: unconfirmed", () => {
  test("unconfirmed: a lost answer blocks the document until the same plan_id is retried, applied once", async () => {
    await harness.createDocument("unconfirmed");
    await harness.createDocument("bystander");
    const pushed: Uint8Array[] = [];
    let dropNextPushAnswer = false;
    const tool = harness.tool({
      fetchImpl: async (input, init) => {
        const url = String(input instanceof Request ? input.url : input);
        const response = await fetch(input, init);
        if (url.endsWith("/push")) {
          pushed.push(new Uint8Array(init?.body as Uint8Array));
          if (dropNextPushAnswer) {
            dropNextPushAnswer = false;
            // The server stored the update; its answer never arrives.
            await response.arrayBuffer();
            throw new TypeError("fetch failed: connection reset");
          }
        }
        return response;
      },
    });
    const run = await tool.handle({ op: "run-edit-script", doc_id: "unconfirmed", script: exclaim });
    assert.ok(run.ok && run.op === "run-edit-script");
    dropNextPushAnswer = true;
    const first = await tool.handle({ op: "commit-plan", doc_id: "unconfirmed", plan_id: run.plan_id });
    assert.equal(
      first.ok && first.op === "commit-plan" && first.status,
      "unconfirmed",
      JSON.stringify(first),
    );
    for (const call of [
      { op: "snapshot", doc_id: "unconfirmed" },
      { op: "run-edit-script", doc_id: "unconfirmed", script: exclaim },
    ]) {
      const blocked = await tool.handle(call);
      assert.ok(!blocked.ok);
      assert.equal(blocked.error.code, "unconfirmed_commit_pending");
      assert.deepEqual(blocked.error.data, { plan_id: run.plan_id });
    }
    const context = await tool.getModelContext({ doc_id: "unconfirmed", context_id: "c" });
    assert.ok(context.prompt.includes(`Plan \`${run.plan_id}\` is UNCONFIRMED`));
    const other = await tool.handle({ op: "run-edit-script", doc_id: "bystander", script: exclaim });
    assert.ok(other.ok && other.op === "run-edit-script");
    const blockedCommit = await tool.handle({
      op: "commit-plan",
      doc_id: "unconfirmed",
      plan_id: "plan_other",
    });
    assert.ok(!blockedCommit.ok);
    assert.equal(blockedCommit.error.code, "unconfirmed_commit_pending");
    const retry = await tool.handle({ op: "commit-plan", doc_id: "unconfirmed", plan_id: run.plan_id });
    assert.equal(retry.ok && retry.op === "commit-plan" && retry.status, "committed", JSON.stringify(retry));
    assert.equal(pushed.length, 2);
    assert.deepEqual(pushed[1], pushed[0], "the retry resends the plan's bytes");
    assert.equal(captionText(await harness.read("unconfirmed")), "Hello!", "applied once");
    const snapshot = await tool.handle({ op: "snapshot", doc_id: "unconfirmed" });
    assert.equal(snapshot.ok, true);
  });

  test("an unconfirmed plan stays retryable however many plans follow on other documents", async () => {
    await harness.createDocument("pinned");
    await harness.createDocument("busy");
    let drop = false;
    const tool = harness.tool({
      maxPlans: 2,
      fetchImpl: async (input, init) => {
        const response = await fetch(input, init);
        if (drop && String(input).endsWith("/push")) {
          drop = false;
          throw new TypeError("fetch failed");
        }
        return response;
      },
    });
    const run = await tool.handle({ op: "run-edit-script", doc_id: "pinned", script: exclaim });
    assert.ok(run.ok && run.op === "run-edit-script");
    drop = true;
    const first = await tool.handle({ op: "commit-plan", doc_id: "pinned", plan_id: run.plan_id });
    assert.equal(first.ok && first.op === "commit-plan" && first.status, "unconfirmed");
    for (let index = 0; index < 4; index++) {
      assert.equal((await tool.handle({ op: "run-edit-script", doc_id: "busy", script: exclaim })).ok, true);
    }
    const retry = await tool.handle({ op: "commit-plan", doc_id: "pinned", plan_id: run.plan_id });
    assert.equal(retry.ok && retry.op === "commit-plan" && retry.status, "committed");
  });
});

describe("commit outcomes: conflicted", () => {
  test("conflicted: the merge would break a constraint; nothing applies unless apply_remaining", async () => {
    await harness.createDocument("conflicted");
    const tool = harness.tool();
    // The plan: the video clip's marker no longer states a length (fine while the clip shows a video).
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "conflicted",
      script: `const video = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'video');
const [held] = relations.of(video.entityId, 'contain').filter((r) => r.endpoint0EntityId === video.entityId);
const [marker] = relations.of(held.endpoint1EntityId, 'marker');
entities.update(marker.endpoint1EntityId, [{ op: 'set', path: ['durationMs'], value: null }]);`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    // Meanwhile another user makes that clip show a caption, which needs its marker's length.
    const doc = new LoroDoc();
    await harness.client.pullInto("conflicted", doc);
    const before = doc.oplogVersion();
    const session = openDocument(doc, timelineSchema, { role: "host" });
    const video = session.entities
      .list({ entityKind: "track" })
      .find((track) => track.payload.role === "video")!;
    const clip = session.relations
      .of(video.entityId, "contain")
      .find((relation) => relation.endpoint0EntityId === video.entityId)!;
    const content = session.relations
      .of(clip.endpoint1EntityId, "contain")
      .find((relation) => relation.endpoint0EntityId === clip.endpoint1EntityId)!;
    session.relations.unlink(content.relationId);
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "Now a caption" } });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: clip.endpoint1EntityId,
      endpoint1EntityId: caption.entityId,
    });
    doc.commit();
    const theirs = await harness.client.push("conflicted", doc.export({ mode: "update", from: before }));
    assert.equal(theirs.status, "committed");
    // A snapshot before: the tool's projection is then kept up by the rows each pull touches.
    const clean = await tool.handle({ op: "snapshot", doc_id: "conflicted" });
    assert.ok(
      clean.ok && clean.op === "snapshot" && clean.issues === undefined,
      JSON.stringify(clean).slice(0, 300),
    );
    const commit = await tool.handle({ op: "commit-plan", doc_id: "conflicted", plan_id: run.plan_id });
    assert.ok(
      commit.ok && commit.op === "commit-plan" && commit.status === "conflicted",
      JSON.stringify(commit),
    );
    assert.equal(commit.applied, false);
    assert.ok(
      commit.reasons.some((reason) => JSON.stringify(reason).includes("needs a marker durationMs")),
      JSON.stringify(commit.reasons),
    );
    const untouched = await harness.read("conflicted");
    assert.equal(untouched.issues.length, 0, "nothing of the plan was stored");
    // The tool's replica took the plan while the server checked it (ADR 0500): a run reads without it.
    const reread = await tool.handle({
      op: "run-edit-script",
      doc_id: "conflicted",
      script: `const video = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'video');
const [held] = relations.of(video.entityId, 'contain').filter((r) => r.endpoint0EntityId === video.entityId);
const [marker] = relations.of(held.endpoint1EntityId, 'marker');
if (entities.get(marker.endpoint1EntityId).payload.durationMs === null) throw new Error('the plan is in the replica');`,
    });
    assert.ok(reread.ok && reread.op === "run-edit-script", JSON.stringify(reread).slice(0, 400));
    const applied = await tool.handle({
      op: "commit-plan",
      doc_id: "conflicted",
      plan_id: run.plan_id,
      apply_remaining: true,
    });
    // What remains still breaks the constraint: apply_remaining refuses, and the document stays valid.
    assert.ok(
      applied.ok && applied.op === "commit-plan" && applied.status === "conflicted",
      JSON.stringify(applied),
    );
    assert.equal(applied.applied, false);
    assert.match(applied.refused ?? "", /would leave the document invalid/);
    assert.equal((await harness.read("conflicted")).issues.length, 0, "nothing of the plan was stored");
  });

  test("lost update: a value another client changed since the plan's version is conflicted field_changed", async () => {
    await harness.createDocument("lost-field");
    const tool = harness.tool();
    const run = await tool.handle({ op: "run-edit-script", doc_id: "lost-field", script: turnMusicDown });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    // Another client sets the same volume twice (its last write is later than the plan's, so it wins).
    const doc = new LoroDoc();
    await harness.client.pullInto("lost-field", doc);
    const before = doc.oplogVersion();
    const session = openDocument(doc, timelineSchema, { role: "host" });
    const bgm = session.entities.list({ entityKind: "track" }).find((track) => track.payload.role === "bgm")!;
    const held = session.relations
      .of(bgm.entityId, "contain")
      .find((r) => r.endpoint0EntityId === bgm.entityId)!;
    for (const volume of [-20, -30]) {
      session.entities.update(held.endpoint1EntityId, [{ op: "set", path: ["volume"], value: volume }]);
      doc.commit();
    }
    const theirs = await harness.client.push("lost-field", doc.export({ mode: "update", from: before }));
    assert.equal(theirs.status, "committed");
    const commit = await tool.handle({ op: "commit-plan", doc_id: "lost-field", plan_id: run.plan_id });
    assert.ok(
      commit.ok && commit.op === "commit-plan" && commit.status === "conflicted",
      JSON.stringify(commit),
    );
    assert.equal(commit.applied, false);
    assert.deepEqual(
      (commit.reasons as { reason: string; entityId?: string; field?: string }[]).map((reason) => [
        reason.reason,
        reason.entityId,
        reason.field,
      ]),
      [["field_changed", held.endpoint1EntityId, "volume"]],
    );
    assert.equal(musicVolume(await harness.read("lost-field")), -30);
  });
});

describe("commit outcomes: a clip deleted meanwhile, and rejected", () => {
  for (const [what, write] of [
    ["move", "relations.move(held.relationId, { index: 0 });"],
    ["retime", "entities.update(marker.endpoint1EntityId, [{ op: 'set', path: ['startMs'], value: 4321 }]);"],
    ["volume", "entities.update(clipId, [{ op: 'set', path: ['volume'], value: -9 }]);"],
  ] as const) {
    test(`lost update: a ${what} of a clip another model deleted is conflicted, one reason, nothing applied`, async () => {
      const docId = `lost-${what}`;
      await harness.createDocument(docId, 2);
      const mover = harness.tool();
      const deleter = harness.tool();
      // The mover works on the video track's last clip.
      const find = `const video = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'video');
const held = relations.of(video.entityId, 'contain').filter((r) => r.endpoint0EntityId === video.entityId).at(-1);
const clipId = held.endpoint1EntityId;
const [marker] = relations.of(clipId, 'marker');`;
      const moved = await mover.handle({
        op: "run-edit-script",
        doc_id: docId,
        script: `${find}\nentities.update(video.entityId, [{ op: 'set', path: ['name'], value: 'Edited' }]);\n${write}`,
      });
      assert.ok(moved.ok && moved.op === "run-edit-script", JSON.stringify(moved));
      const deleted = await deleter.handle({
        op: "run-edit-script",
        doc_id: docId,
        script: `${find}\nentities.delete(clipId);\nconsole.log(clipId);`,
        auto_commit: true,
      });
      assert.ok(deleted.ok && deleted.op === "run-edit-script", JSON.stringify(deleted));
      assert.equal(deleted.commit?.status, "committed", JSON.stringify(deleted.commit));
      const clipId = deleted.logs[0]!.text;
      // The deleting model is told what its delete left unreferenced: the clip's content.
      assert.ok((deleted.preview.unreferenced?.length ?? 0) > 0, JSON.stringify(deleted.preview));
      const commit = await mover.handle({ op: "commit-plan", doc_id: docId, plan_id: moved.plan_id });
      assert.ok(
        commit.ok && commit.op === "commit-plan" && commit.status === "conflicted",
        JSON.stringify(commit),
      );
      assert.equal(commit.applied, false);
      const reasons = commit.reasons as { reason: string; entityId?: string; relationId?: string }[];
      assert.equal(reasons.length, 1, JSON.stringify(reasons));
      assert.match(reasons[0]!.reason, /^(entity|relation)_deleted$/);
      if (what !== "move") assert.equal(reasons[0]!.entityId, clipId);
      const after = await harness.read(docId);
      const video = after.entities.find(
        (entity) => entity.entityKind === "track" && entity.payload.role === "video",
      );
      assert.notEqual(video?.payload.name, "Edited", "the plan's other write was not applied either");
      // Asked for, the writes that still apply land.
      const rest = await mover.handle({
        op: "commit-plan",
        doc_id: docId,
        plan_id: moved.plan_id,
        apply_remaining: true,
      });
      assert.ok(
        rest.ok && rest.op === "commit-plan" && rest.status === "conflicted" && rest.applied,
        JSON.stringify(rest),
      );
      const final = await harness.read(docId);
      const edited = final.entities.find(
        (entity) => entity.entityKind === "track" && entity.payload.role === "video",
      );
      assert.equal(edited?.payload.name, "Edited");
      assert.equal(
        final.entities.some((entity) => entity.entityId === clipId),
        false,
      );
    });
  }

  test("rejected: the server refuses the update, and the next call reads the document afresh", async () => {
    await harness.createDocument("rejected");
    let corrupt = false;
    const tool = harness.tool({
      fetchImpl: async (input, init) => {
        if (corrupt && String(input).endsWith("/push")) {
          corrupt = false;
          const bytes = new Uint8Array(init?.body as Uint8Array);
          return await fetch(input, { ...init, body: bytes.slice(0, Math.floor(bytes.length / 2)) });
        }
        return await fetch(input, init);
      },
    });
    const run = await tool.handle({ op: "run-edit-script", doc_id: "rejected", script: exclaim });
    assert.ok(run.ok && run.op === "run-edit-script");
    corrupt = true;
    const commit = await tool.handle({ op: "commit-plan", doc_id: "rejected", plan_id: run.plan_id });
    assert.equal(
      commit.ok && commit.op === "commit-plan" && commit.status,
      "rejected",
      JSON.stringify(commit),
    );
    assert.equal(captionText(await harness.read("rejected")), "Hello");
    const next = await tool.handle({
      op: "run-edit-script",
      doc_id: "rejected",
      script: exclaim,
      auto_commit: true,
    });
    assert.ok(
      next.ok && next.op === "run-edit-script" && next.commit?.status === "committed",
      JSON.stringify(next),
    );
    assert.equal(captionText(await harness.read("rejected")), "Hello!");
  });
});

describe("commit outcomes: a plan that changes nothing", () => {
  test("writes of the values held preview unchanged; the commit publishes nothing and is not a duplicate", async () => {
    await harness.createDocument("unchanged");
    const pushes: string[] = [];
    const tool = harness.tool({
      fetchImpl: async (input, init) => {
        if (String(input instanceof Request ? input.url : input).endsWith("/push")) pushes.push("push");
        return await fetch(input, init);
      },
    });
    // Each write puts the value the field holds: Loro records no operation for it.
    const rewrite = `const [caption] = entities.list({ entityKind: 'caption' });
entities.update(caption.entityId, [{ op: 'set', path: ['text'], value: caption.payload.text }]);
${turnMusicDown.replace("value: -6", "value: entities.get(held.endpoint1EntityId).payload.volume")}`;
    const same = await tool.handle({ op: "run-edit-script", doc_id: "unchanged", script: rewrite });
    assert.ok(same.ok && same.op === "run-edit-script", JSON.stringify(same));
    assert.deepEqual(
      { writes: same.preview.writes, unchanged: same.preview.unchanged, changes: same.preview.changes },
      { writes: 2, unchanged: true, changes: [] },
    );
    assert.deepEqual(Object.values(same.preview.counts), [0, 0, 0, 0, 0, 0]);
    const commit = await tool.handle({ op: "commit-plan", doc_id: "unchanged", plan_id: same.plan_id });
    assert.ok(
      commit.ok && commit.op === "commit-plan" && commit.status === "committed",
      JSON.stringify(commit),
    );
    assert.deepEqual(
      { unchanged: commit.unchanged, duplicate: commit.duplicate },
      { unchanged: true, duplicate: undefined },
    );
    assert.equal(commit.version, same.version);
    assert.deepEqual(pushes, []);
    // A plan with one real change beside a write of a held value is a plan like any other.
    const changed = await tool.handle({
      op: "run-edit-script",
      doc_id: "unchanged",
      script: `${exclaim}\nentities.update(caption.entityId, [{ op: 'set', path: ['text'], value: 'Hello!' }]);`,
      auto_commit: true,
    });
    assert.ok(changed.ok && changed.op === "run-edit-script", JSON.stringify(changed));
    assert.equal(changed.preview.unchanged, undefined);
    assert.equal(changed.preview.counts.updated, 1);
    assert.ok(changed.commit?.status === "committed" && changed.commit.unchanged === undefined);
    assert.deepEqual(pushes, ["push"]);
    assert.equal(captionText(await harness.read("unchanged")), "Hello!");
  });
});
