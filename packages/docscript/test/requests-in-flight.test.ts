/**
 * A credential holds at most `maxInFlight` requests and `maxWaitingPulls` waiting pulls on a document
 * at once (ADR 0482): past either, 429 `too_many_requests` with `Retry-After`, before the body is read
 * (a chunked one too, which the body limit would read whole if it came first); the client's error is
 * retryable and a commit refused so stays committable; the two are counted apart, so a pull waits while
 * slow bodies fill the requests' places and a push goes while pulls wait; another document's token, and
 * a host credential on the same document, are untouched; places come back when requests end, their
 * clients go, or a push answers the waiting pulls. The admin's creates are bounded the same way.
 */
import assert from "node:assert/strict";
import { type ClientRequest, request } from "node:http";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, DocumentClientError, openDocument, timelineSchema } from "../src/index.ts";
import {
  createSqliteDocumentStore,
  type RunningDocumentServer,
  serveDocuments,
} from "../src/server/index.ts";
import { commitPlan } from "../src/tool/commit-plan.ts";
import type { EditPlan } from "../src/tool/edit-plan.ts";

const tokens: Record<string, string> = {
  "doc-a": "token-a-0123456789abcdef",
  "doc-b": "token-b-0123456789abcdef",
};
const hostToken = "host-token-0123456789abcdef";
const adminToken = "admin-token-0123456789abcdef";

let server: RunningDocumentServer;
const open: ClientRequest[] = [];
before(async () => {
  server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
    maxInFlight: 2,
    maxWaitingPulls: 2,
  });
  for (const [documentId, token] of Object.entries(tokens))
    assert.equal(await server.host.create(documentId, token), true);
});
after(async () => {
  for (const slow of open) slow.destroy();
  await server.close();
});

/** Its own retries off: these tests watch the server's refusals (`refused-retry.test.ts` the retries). */
const client = () =>
  createDocumentClient({
    origin: server.url,
    token: (documentId) => tokens[documentId] ?? "",
    maxRetries: 0,
  });

/** An update adding a track to the document as the server holds it now. */
async function anUpdate(documentId: string): Promise<Uint8Array> {
  const doc = new LoroDoc();
  await client().pullInto(documentId, doc);
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({ entityKind: "track", payload: { role: "bgm" } });
  doc.commit();
  return doc.export({ mode: "update", from: before });
}

/**
 * A POST whose body has sent 9 bytes of 100 KB (or, `chunked`, of a length it never said): it stays in
 * flight until destroyed.
 */
function slowBody(path: string, token: string, chunked = false): ClientRequest {
  const url = new URL(`${server.url}${path}`);
  const slow = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/octet-stream",
      ...(chunked ? {} : { "content-length": 100_000 }),
    },
  });
  slow.on("error", () => undefined);
  slow.write('{"bytes":');
  open.push(slow);
  return slow;
}

const get = (path: string, token: string, signal?: AbortSignal) =>
  fetch(`${server.url}${path}`, {
    headers: { authorization: `Bearer ${token}` },
    ...(signal ? { signal } : {}),
  });

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt += 1) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** Asks until the answer is a refusal (the requests holding the places may still be on their way). */
async function refusal(ask: () => Promise<Response>, what: string): Promise<Response> {
  let refused: Response | undefined;
  await until(async () => {
    const response = await ask();
    if (response.status === 429) refused = response;
    else await response.body?.cancel();
    return refused !== undefined;
  }, what);
  return refused as Response;
}

async function assertRefused(response: Response, what: RegExp): Promise<void> {
  assert.equal(response.status, 429);
  assert.equal(response.headers.get("retry-after"), "1");
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  assert.equal(error.code, "too_many_requests");
  assert.match(error.message, what);
}

it("holds a credential to two requests in flight on a document: the third is refused with Retry-After, a waiting pull and other credentials go on, places come back", async () => {
  const update = await anUpdate("doc-a");
  const stored = await server.host.snapshot("doc-a");
  const slow = [
    slowBody("/documents/doc-a/push", tokens["doc-a"]!),
    slowBody("/documents/doc-a/push", tokens["doc-a"]!, true),
  ];

  const refused = await refusal(
    () => get("/documents/doc-a/snapshot", tokens["doc-a"]!),
    "the third request refused",
  );
  await assertRefused(refused, /2 requests of this credential are in flight on this document/);
  // Through the client: a retryable error saying when to retry, and nothing stored.
  await assert.rejects(client().push("doc-a", update), (error: unknown) => {
    assert.ok(DocumentClientError.isInstance(error));
    assert.equal(error.code, "too_many_requests");
    assert.equal(error.retryable, true);
    assert.equal((error.data as { retryAfterSeconds?: number }).retryAfterSeconds, 1);
    return true;
  });
  // A commit refused so stays unconfirmed (committable again), not rejected.
  const plan = { docId: "doc-a", planId: "plan-1", update, preview: {}, createdFileKeys: [], uploads: [] };
  const context = { client: client(), schema: timelineSchema, hooks: {}, logger: silentLogger };
  assert.equal((await commitPlan(context, plan as unknown as EditPlan)).status, "unconfirmed");
  assert.deepEqual((await server.host.snapshot("doc-a")).version, stored.version, "nothing stored");

  const since = encodeURIComponent(stored.version);
  assert.equal(
    (await get(`/documents/doc-a/updates?since=${since}&waitMs=50`, tokens["doc-a"]!)).status,
    200,
    "a waiting pull has places of its own",
  );
  assert.equal(
    (await get("/documents/doc-a/snapshot", hostToken)).status,
    200,
    "a host credential is another caller",
  );
  assert.equal(
    (await client().push("doc-b", await anUpdate("doc-b"))).status,
    "committed",
    "another document's token is untouched",
  );

  for (const request of slow) request.destroy();
  await until(
    async () => (await commitPlan(context, plan as unknown as EditPlan)).status === "committed",
    "the places coming back",
  );
});

it("holds a credential to two waiting pulls on a document: the third is refused, a push goes on and answers them, places come back", async () => {
  const { version } = await server.host.snapshot("doc-a");
  const pull = (waitMs: number, signal?: AbortSignal) =>
    get(
      `/documents/doc-a/updates?since=${encodeURIComponent(version)}&waitMs=${waitMs}`,
      tokens["doc-a"]!,
      signal,
    );
  const dropped = new AbortController();
  const first = pull(20_000, dropped.signal);
  first.catch(() => undefined);
  const second = pull(20_000);

  await assertRefused(
    await refusal(() => pull(50), "the third waiting pull refused"),
    /2 pulls of this credential wait on this document/,
  );
  await assert.rejects(
    client().pull("doc-a", { since: version, waitMs: 50 }),
    (error: unknown) =>
      DocumentClientError.isInstance(error) && error.code === "too_many_requests" && error.retryable,
  );
  assert.equal(
    (await get("/documents/doc-a/snapshot", tokens["doc-a"]!)).status,
    200,
    "a read is not refused for the pulls",
  );

  // A client that leaves its pull frees its place.
  dropped.abort();
  await until(async () => {
    const answer = await pull(50);
    await answer.body?.cancel();
    return answer.status === 200;
  }, "a dropped pull's place coming back");

  // A push goes while a pull waits, and answers it: its place comes back.
  const third = pull(20_000);
  assert.equal((await client().push("doc-a", await anUpdate("doc-a"))).status, "committed");
  for (const answered of [await second, await third]) {
    assert.equal(answered.status, 200);
    assert.ok((await answered.arrayBuffer()).byteLength > 0, "the pull answers the push");
  }
  const [again, andAgain] = await Promise.all([pull(50), pull(50)]);
  assert.deepEqual([again.status, andAgain.status], [200, 200]);
});

it("holds the admin to two creates in flight, before their bodies are read, leaving the documents' routes alone", async () => {
  const slow = [slowBody("/documents", adminToken), slowBody("/documents", adminToken, true)];
  const create = (documentId: string) =>
    fetch(`${server.url}/documents`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ documentId, token: `token-${documentId}-0123456789` }),
    });
  let probe = 0;
  await assertRefused(
    await refusal(() => create(`doc-probe-${++probe}`), "the third create refused"),
    /2 creates are in flight/,
  );
  assert.equal(
    (await get(`/documents/doc-probe-${probe}/snapshot`, `token-doc-probe-${probe}-0123456789`)).status,
    404,
    "a refused create stores nothing",
  );
  assert.equal((await get("/documents/doc-b/snapshot", tokens["doc-b"]!)).status, 200);
  for (const request of slow) request.destroy();
  await until(async () => (await create("doc-c")).status === 201, "the admin's places coming back");
});
