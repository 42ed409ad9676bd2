/**
 * The document client sends a request the server refused 429 again by itself (ADR 0536), against the
 * real server with one place per credential and document (ADR 0482) held by a slow push body or a
 * waiting pull, counting the requests that reached the server through a relay: a refused push waits out
 * `Retry-After` and is committed once the place frees; with the place kept a pull gives up after
 * `maxRetries` with `too_many_requests`, retryable, saying how many sends were refused; `maxRetries: 0`
 * and `stage` send once; a 401, a 404 and a 500 are sent once; an abort while it waits ends the request
 * at once with `aborted`, and its deadline stops the retries before it; a refused waiting pull is sent
 * again waiting only what is left of its wait.
 */
import assert from "node:assert/strict";
import { type ClientRequest, request } from "node:http";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolAbortedError } from "@tackle/core";
import { promptlyMs, startTcpRelay, type TcpRelay } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, DocumentClientError, openDocument, timelineSchema } from "../src/index.ts";
import {
  createSqliteDocumentStore,
  type DocumentStore,
  type RunningDocumentServer,
  serveDocuments,
} from "../src/server/index.ts";

const documents = ["doc-a", "doc-b", "doc-c", "doc-d", "doc-broken"];
const tokenOf = (documentId: string) => `token-${documentId}-0123456789abcdef`;

/** The real SQLite store, whose member reads fail for one document: the server then answers 500. */
function storeFailingOn(documentId: string): DocumentStore {
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const readMembers = store.readMembers.bind(store);
  store.readMembers = async (id, query) => {
    if (id === documentId) throw new Error("the disk is gone");
    return readMembers(id, query);
  };
  return store;
}

let server: RunningDocumentServer;
let relay: TcpRelay;
const open: ClientRequest[] = [];
before(async () => {
  server = await serveDocuments({
    store: storeFailingOn("doc-broken"),
    schema: timelineSchema,
    maxInFlight: 1,
    maxWaitingPulls: 1,
  });
  for (const documentId of documents)
    assert.equal(await server.host.create(documentId, tokenOf(documentId)), true);
  relay = await startTcpRelay(server.url);
});
after(async () => {
  for (const slow of open) slow.destroy();
  await relay.close();
  await server.close();
});

/** A client through the relay, which counts what reaches the server. */
const client = (options: { maxRetries?: number; timeoutMs?: number } = {}) =>
  createDocumentClient({ origin: relay.url, token: tokenOf, ...options });
const count = (line: string) => relay.requests.filter((request) => request === line).length;

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt += 1) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** Straight to the server: not counted. */
const probe = async (documentId: string, suffix = "snapshot") => {
  const response = await fetch(`${server.url}/documents/${documentId}/${suffix}`, {
    headers: { authorization: `Bearer ${tokenOf(documentId)}` },
  });
  await response.body?.cancel();
  return response.status;
};

/** A push whose body never finishes: it holds the token's one place on the document until destroyed. */
async function holdPlace(documentId: string): Promise<ClientRequest> {
  const url = new URL(`${server.url}/documents/${documentId}/push`);
  const slow = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    headers: {
      authorization: `Bearer ${tokenOf(documentId)}`,
      "content-type": "application/octet-stream",
      "content-length": 100_000,
    },
  });
  slow.on("error", () => undefined);
  slow.write("partial");
  open.push(slow);
  await until(async () => (await probe(documentId)) === 429, "the slow body holding the place");
  return slow;
}

/** An update adding a track to the document as the server holds it now. */
async function anUpdate(documentId: string): Promise<Uint8Array> {
  const doc = new LoroDoc();
  await createDocumentClient({ origin: server.url, token: tokenOf }).pullInto(documentId, doc);
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({ entityKind: "track", payload: { role: "bgm" } });
  doc.commit();
  return doc.export({ mode: "update", from: before });
}

it("sends a refused push again after Retry-After: it is committed once the place frees, once", async () => {
  const update = await anUpdate("doc-a");
  const stored = await server.host.snapshot("doc-a");
  const slow = await holdPlace("doc-a");
  const started = performance.now();
  const pushed = client().push("doc-a", update);
  await until(() => count("POST /documents/doc-a/push") === 1, "the refused push reaching the server");
  slow.destroy();

  const result = await pushed;
  const elapsed = performance.now() - started;
  assert.equal(result.status, "committed");
  assert.equal(count("POST /documents/doc-a/push"), 2, "the refused push and the one sent again");
  assert.ok(elapsed >= 1000, `sent again after Retry-After: 1 (${Math.round(elapsed)} ms)`);
  assert.notEqual((await server.host.snapshot("doc-a")).version, stored.version);
  const { changes } = await createDocumentClient({ origin: server.url, token: tokenOf }).changes("doc-a");
  assert.equal(changes.length, 1, "one update stored");
});

it("gives up after maxRetries with a retryable too_many_requests; 0 and stage send once; only a 429 is sent again", async () => {
  const slow = await holdPlace("doc-b");
  const started = performance.now();
  await assert.rejects(client().pull("doc-b"), (error: unknown) => {
    assert.ok(DocumentClientError.isInstance(error));
    assert.equal(error.code, "too_many_requests");
    assert.equal(error.retryable, true);
    assert.match(error.message, /refused 3 times/);
    assert.deepEqual(error.data, {
      status: 429,
      serverCode: "too_many_requests",
      retryAfterSeconds: 1,
      attempts: 3,
    });
    return true;
  });
  assert.equal(count("GET /documents/doc-b/snapshot"), 3, "the first send and two retries (the default)");
  assert.ok(performance.now() - started >= 2000, "each after Retry-After");

  const once = performance.now();
  const isRefused = (error: unknown) =>
    DocumentClientError.isInstance(error) && error.code === "too_many_requests";
  await assert.rejects(client({ maxRetries: 0 }).planState("doc-b", "plan-1"), isRefused);
  assert.equal(count("GET /documents/doc-b/plans/plan-1"), 1, "maxRetries: 0 sends once");
  await assert.rejects(client().stage("doc-b", new Uint8Array([1, 2, 3])), isRefused);
  assert.equal(count("POST /documents/doc-b/stage"), 1, "a part is not sent again");
  assert.ok(performance.now() - once < promptlyMs, "both answered at once");
  slow.destroy();
  await until(async () => (await probe("doc-b")) === 200, "the place back");

  // Errors that are not 429 go to the caller at once, sent once.
  const codeOf = async (call: Promise<unknown>) => {
    const error = await call.then(
      () => undefined,
      (error: unknown) => error,
    );
    return DocumentClientError.isInstance(error) ? error.code : String(error);
  };
  assert.equal(await codeOf(client().pull("doc-missing")), "not_found");
  assert.equal(count("GET /documents/doc-missing/snapshot"), 1, "a 404 is sent once");
  assert.equal(await codeOf(createDocumentClient({ origin: relay.url }).changes("doc-b")), "unauthorized");
  assert.equal(count("GET /documents/doc-b/changes"), 1, "a 401 is sent once");
  assert.equal(await codeOf(client().entities("doc-broken")), "server_error");
  assert.equal(
    relay.requests.filter((line) => line.startsWith("GET /documents/doc-broken/entities")).length,
    1,
    "a 500 is sent once",
  );
});

it("ends a request waiting to send again at once when its signal aborts, and stops retrying before its deadline", async () => {
  await holdPlace("doc-c");
  const controller = new AbortController();
  const call = client().changes("doc-c", { signal: controller.signal });
  call.catch(() => undefined);
  await until(() => count("GET /documents/doc-c/changes") === 1, "the refusal");
  const aborted = performance.now();
  controller.abort();
  await assert.rejects(
    call,
    (error: unknown) => ToolAbortedError.isInstance(error) && error.code === "aborted",
  );
  assert.ok(performance.now() - aborted < promptlyMs, "rejected at once");
  await sleep(1_500);
  assert.equal(count("GET /documents/doc-c/changes"), 1, "nothing sent after the abort");

  // 2 s of time limit: the first retry after ~1 s fits, a second would end past the deadline.
  const started = performance.now();
  await assert.rejects(
    client({ timeoutMs: 2_000, maxRetries: 5 }).planState("doc-c", "plan-2"),
    (error: unknown) => {
      assert.ok(DocumentClientError.isInstance(error));
      assert.equal(error.code, "too_many_requests", "the refusal, not a network error");
      assert.equal((error.data as { attempts: number }).attempts, 2);
      return true;
    },
  );
  assert.ok(performance.now() - started < 2_000, "answered before the deadline");
  assert.equal(count("GET /documents/doc-c/plans/plan-2"), 2);
});

it("sends a refused waiting pull again waiting only what is left of its wait", async () => {
  const { version } = await server.host.snapshot("doc-d");
  const since = encodeURIComponent(version);
  const holder = new AbortController();
  const held = fetch(`${server.url}/documents/doc-d/updates?since=${since}&waitMs=20000`, {
    headers: { authorization: `Bearer ${tokenOf("doc-d")}` },
    signal: holder.signal,
  });
  held.catch(() => undefined);
  await until(
    async () => (await probe("doc-d", `updates?since=${since}&waitMs=10`)) === 429,
    "the pull held",
  );

  const pulls = () => relay.requests.filter((line) => line.startsWith("GET /documents/doc-d/updates"));
  const started = performance.now();
  const pulled = client().pull("doc-d", { since: version, waitMs: 3_000 });
  await until(() => pulls().length === 1, "the refused pull");
  holder.abort();
  const result = await pulled;
  const elapsed = performance.now() - started;

  assert.equal(result.kind, "updates");
  assert.equal(result.version, version, "nothing was pushed meanwhile: it answered at the end of its wait");
  const [first, again] = pulls().map((line) => Number(/waitMs=(\d+)/.exec(line)?.[1]));
  assert.equal(pulls().length, 2);
  assert.equal(first, 3_000);
  assert.ok(again !== undefined && again <= 2_000 && again >= 1_000, `sent again waiting ${again} ms`);
  assert.ok(
    elapsed >= 2_900 && elapsed < 3_000 + promptlyMs,
    `answered after its wait (${Math.round(elapsed)} ms)`,
  );
});
