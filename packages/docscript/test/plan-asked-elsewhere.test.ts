/**
 * A plan's state asked at another server while its push is still on its way into the store (ADR 0568):
 * two document servers over one SQLite file, server A holding a received push before its append. Server
 * B answers the plan `unknown` (it cannot see a push in another process), and A stores the plan later:
 * a tool that reran the script under a new plan id would apply its edit twice. The tool's rerun takes
 * the plan's id (`run-edit-script` with `plan_id`), so whichever push comes second is a duplicate.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import {
  createDocumentClient,
  type DocumentClient,
  interpretDocument,
  openDocument,
  timelineSchema,
} from "../src/index.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { createDocScriptTool } from "../src/tool/create-doc-script-tool.ts";

const adminToken = "admin-token-asked-elsewhere-0123456789";
const token = "document-token-asked-elsewhere-0123456789";
const hostToken = "host-token-asked-elsewhere-0123456789";
const addPhonetic = `entities.create({ entityKind: 'phonetic-script', payload: { text: 'said again' } });`;

let directory: string;
let serverA: RunningDocumentServer;
let serverB: RunningDocumentServer;
/** Set by a test: server A's next append waits for it (the push received, not yet stored). */
let holdAppend: Promise<void> | undefined;
let appendReached: (() => void) | undefined;

before(async () => {
  directory = await mkdtemp(join(tmpdir(), "docscript-asked-elsewhere-"));
  const path = join(directory, "documents.sqlite");
  const inner = createSqliteDocumentStore({ path });
  const held: DocumentStore = {
    ...inner,
    async append(input) {
      const hold = holdAppend;
      holdAppend = undefined;
      appendReached?.();
      await hold;
      return inner.append(input);
    },
  };
  const options = { schema: timelineSchema, adminToken, hostTokens: [hostToken] };
  serverA = await serveDocuments({ store: held, ...options });
  serverB = await serveDocuments({ store: createSqliteDocumentStore({ path }), ...options });
});
after(async () => {
  await serverA.close();
  await serverB.close();
  await rm(directory, { recursive: true, force: true });
});

/** The document, and a plan adding one phonetic script pushed through A and held before its append. */
async function heldPush(docId: string) {
  const clientA = createDocumentClient({ origin: serverA.url, token });
  const clientB = createDocumentClient({ origin: serverB.url, token });
  assert.equal(
    await clientA.createDocument(docId, { adminToken, token, snapshot: sampleTimelineSnapshot() }),
    true,
  );
  const doc = new LoroDoc();
  await clientA.pullInto(docId, doc);
  const from = doc.oplogVersion();
  const planId = `plan_${docId}`;
  openDocument(doc, timelineSchema).entities.create({
    entityKind: "phonetic-script",
    payload: { text: "said once" },
  });
  doc.commit({ message: JSON.stringify({ planId }) });
  let release = () => {};
  holdAppend = new Promise<void>((resolve) => {
    release = resolve;
  });
  const reached = new Promise<void>((resolve) => {
    appendReached = resolve;
  });
  const pushed = clientA.push(docId, doc.export({ mode: "update", from }));
  await reached;
  const phonetics = async (client: DocumentClient) => {
    const read = new LoroDoc();
    await client.pullInto(docId, read);
    return interpretDocument(read, timelineSchema).entities.filter((e) => e.entityKind === "phonetic-script");
  };
  return { clientB, planId, pushed, release, phonetics, before: (await phonetics(clientB)).length };
}

describe("a plan asked at another server while its push is on its way", () => {
  it("server B answers unknown for a plan server A is storing, and A stores it after", async () => {
    const { clientB, planId, pushed, release, phonetics, before } = await heldPush("asked-at-b");
    assert.equal((await clientB.planState("asked-at-b", planId)).state, "unknown");
    release();
    assert.equal((await pushed).status, "committed");
    assert.equal((await clientB.planState("asked-at-b", planId)).state, "applied");
    assert.equal((await phonetics(clientB)).length, before + 1);
  });

  it("the tool's rerun after not_found takes the plan's id: the edit lands once", async () => {
    const { planId, pushed, release, phonetics, before } = await heldPush("rerun-at-b");
    const tool = createDocScriptTool({
      httpOrigin: serverB.url,
      authToken: hostToken,
      userId: "user-1",
      documents: ["rerun-at-b"],
    });
    try {
      const asked = (await tool.handle({ op: "commit-plan", doc_id: "rerun-at-b", plan_id: planId })) as {
        ok: boolean;
        error?: { code: string; message: string };
      };
      assert.equal(asked.error?.code, "not_found", JSON.stringify(asked));
      assert.match(asked.error?.message ?? "", new RegExp(`run the script again with plan_id ${planId}`));
      // What the answer tells the model: the script run again under the plan's id, committed at B.
      const rerun = (await tool.handle({
        op: "run-edit-script",
        doc_id: "rerun-at-b",
        script: addPhonetic,
        plan_id: planId,
        auto_commit: true,
      })) as { ok: boolean; plan_id?: string; commit?: { status: string } };
      assert.equal(rerun.plan_id, planId, JSON.stringify(rerun));
      assert.equal(rerun.commit?.status, "committed", JSON.stringify(rerun));
      // A's push lands after: it finds the plan applied, and stores nothing.
      release();
      const late = await pushed;
      assert.deepEqual([late.status, late.status === "committed" && late.duplicate], ["committed", true]);
      assert.equal(
        (await phonetics(createDocumentClient({ origin: serverA.url, token }))).length,
        before + 1,
      );
    } finally {
      release();
      await tool.close();
    }
  });
});

describe("a run again under a plan's id", () => {
  it("a run under the id of a plan already applied is refused: a new edit is never answered duplicate", async () => {
    const { planId, pushed, release, phonetics, before } = await heldPush("reused-at-b");
    release();
    assert.equal((await pushed).status, "committed");
    const tool = createDocScriptTool({
      httpOrigin: serverB.url,
      authToken: hostToken,
      userId: "user-1",
      documents: ["reused-at-b"],
    });
    try {
      const rerun = (await tool.handle({
        op: "run-edit-script",
        doc_id: "reused-at-b",
        script: addPhonetic,
        plan_id: planId,
        auto_commit: true,
      })) as { ok: boolean; error?: { code: string; message: string } };
      // Before: answered committed (duplicate) while the new edit was dropped.
      assert.equal(rerun.error?.code, "invalid_input", JSON.stringify(rerun));
      assert.match(rerun.error?.message ?? "", /applied already/);
      assert.equal(
        (await phonetics(createDocumentClient({ origin: serverB.url, token }))).length,
        before + 1,
      );
    } finally {
      await tool.close();
    }
  });
});
