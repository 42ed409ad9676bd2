/**
 * Undo and history (issue 25, point 7), against the server's push check, with two users: a committed
 * plan read back as a diff, and `revertPlan` making a new plan that inverts it — committed when nothing
 * touched what it writes since, `conflicted` (nothing stored) when another user changed the same field
 * or deleted what the plan wrote, and keeping the other user's unrelated change when it commits.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { type DocumentSession, interpretDocument, openDocument, timelineSchema } from "../src/index.ts";
import { createSqliteDocumentStore, DocumentHost, type DocumentStore } from "../src/server/index.ts";
import { planDiff, revertPlan } from "../src/tool/plan-history.ts";
import { apply, seedSnapshot } from "./lost-update-rule.ts";

let directory: string;
let store: DocumentStore;
let host: DocumentHost;
let documents = 0;
let peers = 100;

before(async () => {
  directory = await mkdtemp(join(tmpdir(), "docscript-plan-history-"));
  store = await createSqliteDocumentStore({ path: join(directory, "documents.db") });
  host = new DocumentHost({ store, schema: timelineSchema });
});
after(async () => {
  await host.close();
  await store.close();
  await rm(directory, { recursive: true, force: true });
});

/** A user: a replica of the document, pulled before each plan, that pushes plans made on it. */
function user(documentId: string) {
  const doc = new LoroDoc();
  return {
    doc,
    async pull() {
      doc.import((await host.snapshot(documentId)).bytes);
    },
    /** Runs `edit` as a plan on what the user last pulled (a fresh peer, as a run has) and pushes it. */
    async plan(planId: string, edit: (session: DocumentSession) => void) {
      const fork = doc.fork();
      fork.setPeerId(BigInt(peers++));
      const from = fork.oplogVersion();
      const session = openDocument(fork, timelineSchema);
      edit(session);
      assert.deepEqual(session.check(), [], `${planId} is valid on its own`);
      fork.commit({ message: JSON.stringify({ planId }) });
      return await host.push(documentId, fork.export({ mode: "update", from }), {});
    },
    /** Reverts the committed plan `planId` as read from the user's replica, and pushes the revert. */
    async revert(planId: string) {
      await this.pull();
      const made = revertPlan(doc, planId, {
        revertPlanId: `revert-of-${planId}`,
        peerId: String(peers++),
        schema: timelineSchema,
      });
      return { made, result: await host.push(documentId, made.update, {}) };
    },
  };
}

async function twoUsers() {
  const documentId = `plan-history-${documents++}`;
  await host.create(documentId, "token-0123456789abcdef", seedSnapshot());
  const alice = user(documentId);
  const bob = user(documentId);
  await Promise.all([alice.pull(), bob.pull()]);
  const read = async () => {
    const doc = new LoroDoc();
    doc.import((await host.snapshot(documentId)).bytes);
    return interpretDocument(doc, timelineSchema);
  };
  return { alice, bob, read };
}

const payloadOf = (document: ReturnType<typeof interpretDocument>, id: string) =>
  document.entities.find((entity) => entity.entityId === id)?.payload;
const holderOf = (document: ReturnType<typeof interpretDocument>, clip: string) =>
  document.relations.find(
    (relation) => relation.relationKind === "contain" && relation.endpoint1EntityId === clip,
  )?.endpoint0EntityId;

describe("a committed plan's diff, and a revert that commits", () => {
  it("reads a plan's changes back as a diff, and a revert puts the document back as it was", async () => {
    const { alice, read } = await twoUsers();
    const base = await read();
    const marker = base.relations.find(
      (relation) => relation.relationKind === "marker" && relation.endpoint0EntityId === "clip-seed-2",
    )!.endpoint1EntityId;
    const committed = await alice.plan("p-edit", (session) => {
      apply(session, { kind: "retime", clip: "clip-seed-2", startMs: 4000 });
      apply(session, { kind: "move", clip: "clip-seed-4", track: "track-a", index: 0 });
      apply(session, { kind: "delete-clip", clip: "clip-seed-0" });
      apply(session, {
        kind: "add-caption",
        track: "track-b",
        id: "new",
        startMs: 9000,
        text: "hi",
        index: 0,
      });
    });
    assert.equal(committed.status, "committed", JSON.stringify(committed));
    await alice.pull();
    const diff = planDiff(alice.doc, "p-edit", timelineSchema);
    const find = (change: string, id: string) =>
      diff.changes.find(
        (item) =>
          item.change === change &&
          ("entityId" in item ? item.entityId === id : item.endpoint1EntityId === id),
      );
    assert.deepEqual(find("updated", marker), {
      change: "updated",
      entityId: marker,
      entityKind: "sequence-marker",
      fields: [{ path: "startMs", before: 0, after: 4000 }],
    });
    assert.ok(find("deleted", "clip-seed-0") && find("deleted", "caption-seed-0"), JSON.stringify(diff));
    assert.ok(find("created", "clip-new") && find("created", "caption-new"), JSON.stringify(diff));
    assert.equal(
      (find("moved", "clip-seed-4") as { endpoint0EntityId?: string })?.endpoint0EntityId,
      "track-a",
    );
    assert.ok(find("unlinked", "clip-seed-0"), "the deleted clip taken off its track is listed");
    assert.equal(diff.omitted, 0);
    assert.equal(
      diff.changes.length,
      Object.values(diff.counts).reduce((sum, count) => sum + count, 0),
    );

    const { made, result } = await alice.revert("p-edit");
    assert.equal(result.status, "committed", JSON.stringify(result));
    assert.ok(
      made.preview.counts.deleted >= 3 && made.preview.counts.created >= 2,
      JSON.stringify(made.preview),
    );
    const now = await read();
    assert.deepEqual(now.issues, []);
    assert.deepEqual(
      now.entities.map((entity) => [entity.entityId, entity.payload]),
      base.entities.map((entity) => [entity.entityId, entity.payload]),
      "every entity as before the plan",
    );
    const ends = (document: typeof now) =>
      document.relations
        .map(
          (relation) =>
            `${relation.relationKind} ${relation.endpoint0EntityId} ${relation.endpoint1EntityId}`,
        )
        .sort();
    assert.deepEqual(ends(now), ends(base), "every relation as before the plan");
  });
});

describe("revert-plan after another user's change", () => {
  it("answers a revert conflicted when another user changed the same field since, and stores nothing", async () => {
    const { alice, bob, read } = await twoUsers();
    assert.equal(
      (
        await alice.plan("p-volume", (session) =>
          apply(session, { kind: "volume", clip: "clip-seed-1", value: -3 }),
        )
      ).status,
      "committed",
    );
    await bob.pull();
    assert.equal(
      (
        await bob.plan("p-bob", (session) =>
          apply(session, { kind: "volume", clip: "clip-seed-1", value: -9 }),
        )
      ).status,
      "committed",
    );
    const { result } = await alice.revert("p-volume");
    assert.ok(result.status === "conflicted" && !result.applied, JSON.stringify(result));
    assert.ok(
      result.reasons.some(
        (reason) =>
          reason.reason === "field_changed" && reason.entityId === "clip-seed-1" && reason.field === "volume",
      ),
      JSON.stringify(result.reasons),
    );
    assert.equal(payloadOf(await read(), "clip-seed-1")?.volume, -9, "Bob's volume stays");
  });

  it("answers a revert conflicted when another user deleted what the plan created since", async () => {
    const { alice, bob, read } = await twoUsers();
    const added = await alice.plan("p-add", (session) =>
      apply(session, { kind: "add-caption", track: "track-c", id: "a", startMs: 0, text: "one", index: 0 }),
    );
    assert.equal(added.status, "committed");
    await bob.pull();
    assert.equal(
      (
        await bob.plan("p-bob-edit", (session) =>
          apply(session, { kind: "splice", caption: "caption-a", index: 0, deleteCount: 0, insert: "Bob: " }),
        )
      ).status,
      "committed",
    );
    const { result } = await alice.revert("p-add");
    assert.ok(result.status === "conflicted" && !result.applied, JSON.stringify(result));
    assert.equal(payloadOf(await read(), "caption-a")?.text, "Bob: one", "Bob's edit stays");
  });

  it("commits a revert beside another user's unrelated change, which stays", async () => {
    const { alice, bob, read } = await twoUsers();
    assert.equal(
      (
        await alice.plan("p-move", (session) =>
          apply(session, { kind: "move", clip: "clip-seed-5", track: "track-a", index: 0 }),
        )
      ).status,
      "committed",
    );
    assert.equal(
      (
        await bob.plan("p-bob-volume", (session) =>
          apply(session, { kind: "volume", clip: "clip-seed-3", value: -7 }),
        )
      ).status,
      "committed",
    );
    const { result } = await alice.revert("p-move");
    assert.equal(result.status, "committed", JSON.stringify(result));
    const now = await read();
    assert.deepEqual(now.issues, []);
    assert.equal(holderOf(now, "clip-seed-5"), "track-c", "the clip back on its track");
    assert.equal(payloadOf(now, "clip-seed-3")?.volume, -7, "Bob's change stays");
  });
});
