/**
 * `apply_remaining` stores only a remainder that keeps the document valid, or refuses and stores nothing
 * (issue 25, point 1): two users from one base, one plan committed, the other retried with
 * `applyRemaining`. A remainder whose relation would dangle (its end deleted by the other user) is
 * refused; a remainder that only loses a field the other user changed is stored without that field.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { type DocumentSession, interpretDocument, openDocument, timelineSchema } from "../src/index.ts";
import { createSqliteDocumentStore, DocumentHost, type DocumentStore } from "../src/server/index.ts";
import { apply, seedSnapshot } from "./lost-update-rule.ts";

let directory: string;
let store: DocumentStore;
let host: DocumentHost;
let documents = 0;

before(async () => {
  directory = await mkdtemp(join(tmpdir(), "docscript-apply-remaining-"));
  store = await createSqliteDocumentStore({ path: join(directory, "documents.db") });
  host = new DocumentHost({ store, schema: timelineSchema });
});
after(async () => {
  await host.close();
  await store.close();
  await rm(directory, { recursive: true, force: true });
});

/** A fresh document (three tracks of two caption clips each) and a way to make plans from its base. */
async function twoUsers() {
  const documentId = `apply-remaining-${documents++}`;
  await host.create(documentId, "token-0123456789abcdef", seedSnapshot());
  const base = new LoroDoc();
  base.import((await host.snapshot(documentId)).bytes);
  let peer = 10n;
  /** A plan made on the base by `edit`, as the update a client pushes. */
  const plan = (name: string, edit: (session: DocumentSession) => void) => {
    const doc = base.fork();
    doc.setPeerId(peer++);
    const from = doc.oplogVersion();
    const session = openDocument(doc, timelineSchema);
    edit(session);
    assert.deepEqual(session.check(), [], `${name} is valid on its own`);
    doc.commit({ message: JSON.stringify({ planId: `${documentId}-${name}` }) });
    return doc.export({ mode: "update", from });
  };
  const read = async () => {
    const doc = new LoroDoc();
    doc.import((await host.snapshot(documentId)).bytes);
    return interpretDocument(doc, timelineSchema);
  };
  return { documentId, plan, read };
}

const holderOf = (document: ReturnType<typeof interpretDocument>, clip: string) =>
  document.relations.find(
    (relation) => relation.relationKind === "contain" && relation.endpoint1EntityId === clip,
  )?.endpoint0EntityId;

const payloadOf = (document: ReturnType<typeof interpretDocument>, id: string) =>
  document.entities.find((entity) => entity.entityId === id)?.payload;

describe("apply_remaining keeps the document valid or refuses", () => {
  it("refuses a remainder whose new relation would point at a track the other user deleted", async () => {
    const { documentId, plan, read } = await twoUsers();
    // Alice deletes track-a; Bob, from the same base, retimes a clip Alice also retimed and adds a
    // caption clip to track-a.
    const alice = plan("alice", (session) => {
      apply(session, { kind: "retime", clip: "clip-seed-2", startMs: 4000 });
      apply(session, { kind: "delete-track", track: "track-a" });
    });
    const bob = plan("bob", (session) => {
      apply(session, { kind: "retime", clip: "clip-seed-2", startMs: 7000 });
      apply(session, {
        kind: "add-caption",
        track: "track-a",
        id: "bob",
        startMs: 9000,
        text: "late",
        index: 0,
      });
    });
    assert.equal((await host.push(documentId, alice, {})).status, "committed");
    const before = await read();
    const conflicted = await host.push(documentId, bob, {});
    assert.ok(conflicted.status === "conflicted" && !conflicted.applied, JSON.stringify(conflicted));
    const rest = await host.push(documentId, bob, { applyRemaining: true });
    assert.ok(rest.status === "conflicted", JSON.stringify(rest));
    assert.equal(rest.applied, false, "nothing of Bob's plan is stored");
    assert.match(rest.refused ?? "", /apply_remaining refused/);
    assert.ok(
      rest.issues.some((issue) => issue.entityId === "track-a" || /track-a/.test(issue.message)),
      `the refusal names the dangling end: ${JSON.stringify(rest.issues)}`,
    );
    const now = await read();
    assert.deepEqual(now, before, "the document is Alice's, unchanged");
    assert.deepEqual(now.issues, []);
  });

  it("leaves out, and names, writes to a clip and its relation the other user deleted", async () => {
    const { documentId, plan, read } = await twoUsers();
    const alice = plan("alice", (session) => apply(session, { kind: "delete-clip", clip: "clip-seed-0" }));
    // Bob turns the clip's volume down (a write into a row deleted since: left out) and moves the clip to
    // track-b (the relation row Alice deleted with the clip).
    const bob = plan("bob", (session) => {
      apply(session, { kind: "volume", clip: "clip-seed-0", value: -12 });
      apply(session, { kind: "move", clip: "clip-seed-0", track: "track-b", index: 0 });
    });
    assert.equal((await host.push(documentId, alice, {})).status, "committed");
    const before = await read();
    const rest = await host.push(documentId, bob, { applyRemaining: true });
    assert.ok(rest.status === "conflicted", JSON.stringify(rest));
    // Both writes land in rows Alice deleted: left out, named, and nothing of them shows.
    assert.ok(rest.status === "conflicted" && rest.applied, JSON.stringify(rest));
    assert.deepEqual(rest.reasons.map((reason) => reason.reason).sort(), [
      "entity_deleted",
      "relation_deleted",
    ]);
    const now = await read();
    assert.deepEqual(now.issues, [], "the document is valid");
    assert.equal(payloadOf(now, "clip-seed-0"), undefined, "the clip stays deleted");
    assert.equal(holderOf(now, "clip-seed-0"), undefined, "and on no track");
    assert.deepEqual(now, before, "nothing of Bob's shows");
  });

  it("stores the rest of a plan without the field the other user changed", async () => {
    const { documentId, plan, read } = await twoUsers();
    const alice = plan("alice", (session) =>
      apply(session, { kind: "volume", clip: "clip-seed-1", value: -3 }),
    );
    const bob = plan("bob", (session) => {
      apply(session, { kind: "volume", clip: "clip-seed-1", value: -20 });
      apply(session, { kind: "move", clip: "clip-seed-4", track: "track-a", index: 0 });
    });
    assert.equal((await host.push(documentId, alice, {})).status, "committed");
    const rest = await host.push(documentId, bob, { applyRemaining: true });
    assert.ok(rest.status === "conflicted" && rest.applied, JSON.stringify(rest));
    assert.ok(rest.reasons.some((reason) => reason.reason === "field_changed" && reason.field === "volume"));
    const now = await read();
    assert.deepEqual(now.issues, []);
    assert.equal(payloadOf(now, "clip-seed-1")?.volume, -3, "Alice's volume kept");
    assert.equal(holderOf(now, "clip-seed-4"), "track-a", "Bob's move stored");
  });
});
