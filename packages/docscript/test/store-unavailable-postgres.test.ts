/**
 * PostgreSQL failing for a moment under a request (ADR 0492): server B reaches it through a TCP relay
 * that resets the connection a request's query went out on, as the answer comes back (a connection
 * cut under a pooled client, a session ended). Every route answers 503 `unavailable` with
 * `Retry-After` and the typed body, not 500, and answers again when sent again; a push whose `COMMIT`
 * answer was lost is `unconfirmed` to the tool's commit, and committing it again answers `duplicate`,
 * its plan `applied`, stored once. Server A reaches PostgreSQL directly and creates the documents.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { silentLogger } from "@tackle/core";
import { createTestDatabase, startTcpRelay, type TcpRelay, type TestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, DocumentClientError, openDocument, timelineSchema } from "../src/index.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { commitPlan } from "../src/tool/commit-plan.ts";
import type { EditPlan } from "../src/tool/edit-plan.ts";

const adminToken = "admin-token-unavailable-0123456789";
const token = "token-unavailable-0123456789abcdef";
const ignore = () => {};
let database: TestDatabase;
let relay: TcpRelay;
let a: RunningDocumentServer;
let b: RunningDocumentServer;

async function serverOn(connectionString: string): Promise<RunningDocumentServer> {
  const store = await createPostgresDocumentStore({ connectionString, onError: ignore });
  return serveDocuments({ store, schema: timelineSchema, adminToken, logger: silentLogger });
}

before(async () => {
  database = await createTestDatabase("docscript_store_unavailable");
  relay = await startTcpRelay(database.url);
  a = await serverOn(database.url);
  b = await serverOn(relay.url);
});
after(async () => {
  relay.up();
  await b?.close();
  await a?.close();
  await relay?.close();
  await database?.drop();
});

/** Creates `documentId` through A; its version and an update naming `planId` made on it. */
async function documentWithUpdate(documentId: string, planId: string) {
  const client = createDocumentClient({ origin: a.url, token });
  assert.equal(await client.createDocument(documentId, { adminToken, token }), true);
  const doc = new LoroDoc();
  const { version } = await client.pullInto(documentId, doc);
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({
    entityKind: "track",
    payload: { role: "bgm", name: "music" },
  });
  doc.commit({ message: JSON.stringify({ planId }) });
  return { version, update: doc.export({ mode: "update", from: before }) };
}

type Route = (documentId: string, version: string, update: Uint8Array) => [string, RequestInit];
const json = (body: unknown): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
const bytes = (update: Uint8Array): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/octet-stream" },
  body: update as Uint8Array<ArrayBuffer>,
});
const routes: Record<string, Route> = {
  snapshot: (id) => [`/documents/${id}/snapshot`, {}],
  updates: (id, version) => [`/documents/${id}/updates?since=${encodeURIComponent(version)}`, {}],
  push: (id, _, update) => [`/documents/${id}/push`, bytes(update)],
  stage: (id, _, update) => [`/documents/${id}/stage`, bytes(update)],
  changes: (id) => [`/documents/${id}/changes`, {}],
  entities: (id) => [`/documents/${id}/entities`, {}],
  relations: (id) => [`/documents/${id}/relations`, {}],
  rows: (id) => [`/documents/${id}/rows`, json({ lookups: [{ rows: "entities", ids: ["nobody"] }] })],
  plan: (id) => [`/documents/${id}/plans/plan-nobody`, {}],
};

async function send(path: string, init: RequestInit, bearer: string): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${bearer}`);
  return fetch(`${b.url}${path}`, { ...init, headers });
}

/** Asserts `response` is the store failing for the moment: 503, `Retry-After`, the typed body. */
async function assertUnavailable(response: Response, what: string): Promise<void> {
  const body = (await response.json()) as { error?: { code?: string; data?: Record<string, unknown> } };
  assert.equal(response.status, 503, `${what}: ${JSON.stringify(body)}`);
  assert.equal(response.headers.get("retry-after"), "1", what);
  assert.equal(body.error?.code, "unavailable", what);
  assert.deepEqual(body.error?.data, { retryable: true, retryAfterSeconds: 1 }, what);
}

it("every route answers a database connection lost under it 503 unavailable with Retry-After, then serves", async () => {
  for (const [name, route] of Object.entries(routes)) {
    const documentId = `unavailable-${name}`;
    const { version, update } = await documentWithUpdate(documentId, `plan-${name}`);
    const [path, init] = route(documentId, version, update);
    const resets = relay.resets;
    // B has not opened the document: its first query about it (the token's check) goes out, and the
    // connection is reset as the answer comes back.
    relay.loseAnswerTo((text) => text.includes(documentId));
    await assertUnavailable(await send(path, init, token), name);
    assert.equal(relay.resets, resets + 1, `${name}: the fault fired`);
    const again = await send(path, init, token);
    assert.equal(again.status, 200, `${name} sent again: ${await again.text()}`);
  }
  // The admin's create, whose first query names the new document.
  const create = json({ documentId: "unavailable-create", token });
  relay.loseAnswerTo((text) => text.includes("unavailable-create"));
  await assertUnavailable(await send("/documents", create, adminToken), "create");
  const again = await send("/documents", create, adminToken);
  assert.ok([201, 409].includes(again.status), `create sent again: ${again.status}`);
});

it("a push whose COMMIT answer was lost is unconfirmed, then committed once as a duplicate", async () => {
  const documentId = "unavailable-commit";
  const planId = "plan-commit-lost";
  const { update } = await documentWithUpdate(documentId, planId);
  const client = createDocumentClient({ origin: b.url, token });
  // B opens the document first, so the push's own transaction meets the fault.
  await client.pullInto(documentId, new LoroDoc());
  let appended = false;
  relay.loseAnswerTo((text) => {
    if (text.includes("INSERT INTO docscript_updates") && text.includes(documentId)) appended = true;
    return appended && /COMMIT/.test(text);
  });
  const resets = relay.resets;
  // The tool's commit of the plan: unconfirmed (never rejected), committed when sent again.
  const context = { client, schema: timelineSchema, hooks: {}, logger: silentLogger };
  const plan = { docId: documentId, planId, update, preview: {}, createdFileKeys: [], uploads: [] };
  const lost = await commitPlan(context, plan as unknown as EditPlan);
  assert.equal(relay.resets, resets + 1, "the COMMIT's answer was lost");
  assert.equal(lost.status, "unconfirmed", JSON.stringify(lost));
  assert.match(lost.status === "unconfirmed" ? lost.reason : "", /could not be reached for the moment/);
  const committed = await commitPlan(context, plan as unknown as EditPlan);
  assert.deepEqual(committed.status === "committed" && committed.duplicate, true, JSON.stringify(committed));
  assert.equal((await client.planState(documentId, planId)).state, "applied");
  const page = await createDocumentClient({ origin: a.url, token }).changes(documentId);
  assert.equal(page.changes.filter((change) => change.planIds.includes(planId)).length, 1, "stored once");
});

it("the client makes a 503 a retryable server_error naming unavailable and its Retry-After", async () => {
  const documentId = "unavailable-client";
  await documentWithUpdate(documentId, "plan-client");
  const client = createDocumentClient({ origin: b.url, token });
  relay.loseAnswerTo((text) => text.includes(documentId));
  await assert.rejects(client.planState(documentId, "plan-client"), (error: unknown) => {
    assert.ok(DocumentClientError.isInstance(error), String(error));
    assert.equal(error.code, "server_error");
    assert.equal(error.retryable, true);
    assert.equal(error.status, 503);
    assert.deepEqual(error.data, { status: 503, serverCode: "unavailable", retryAfterSeconds: 1 });
    return true;
  });
  assert.equal(
    (await client.planState(documentId, "plan-client")).state,
    "unknown",
    "answered when sent again",
  );
});
