/**
 * A SQLite file busy past its busy timeout under a request (ADR 0492): another connection holds the
 * file's write lock, so a push's (and a create's) transaction cannot begin within the busy timeout
 * (5 s). The server answers 503 `unavailable` with `Retry-After` and the typed body, not 500, having
 * stored nothing; once the lock is let go the same request succeeds, stored once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, it } from "node:test";
import { silentLogger } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { openDocument, timelineSchema } from "../src/index.ts";
import { createDocumentServer, createSqliteDocumentStore, type DocumentServer } from "../src/server/index.ts";

const adminToken = "admin-token-sqlite-busy-0123456789";
const token = "token-sqlite-busy-0123456789abcdef";
const directory = mkdtempSync(join(tmpdir(), "docscript-sqlite-busy-"));
const path = join(directory, "documents.sqlite");
let server: DocumentServer;

before(() => {
  server = createDocumentServer({
    store: createSqliteDocumentStore({ path }),
    schema: timelineSchema,
    adminToken,
    logger: silentLogger,
  });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const request = (route: string, bearer: string, init: RequestInit = {}) => {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${bearer}`);
  return server.fetch(new Request(`http://docs.test${route}`, { ...init, headers }));
};
const create = (documentId: string) =>
  request("/documents", adminToken, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ documentId, token }),
  });

/** Runs `work` while another connection holds the file's write lock. */
async function whileLocked<Value>(work: () => Promise<Value>): Promise<Value> {
  const locker = new DatabaseSync(path);
  locker.exec("BEGIN IMMEDIATE");
  try {
    return await work();
  } finally {
    locker.exec("ROLLBACK");
    locker.close();
  }
}

async function assertUnavailable(response: Response, what: string): Promise<void> {
  const body = (await response.json()) as { error?: { code?: string; data?: Record<string, unknown> } };
  assert.equal(response.status, 503, `${what}: ${JSON.stringify(body)}`);
  assert.equal(response.headers.get("retry-after"), "1", what);
  assert.equal(body.error?.code, "unavailable", what);
  assert.deepEqual(body.error?.data, { retryable: true, retryAfterSeconds: 1 }, what);
}

it("a push and a create meeting the file locked past the busy timeout answer 503 unavailable, then succeed", async () => {
  assert.equal((await create("busy-doc")).status, 201);
  const pulled = await request("/documents/busy-doc/snapshot", token);
  assert.equal(pulled.status, 200);
  const doc = LoroDoc.fromSnapshot(new Uint8Array(await pulled.arrayBuffer()));
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({
    entityKind: "track",
    payload: { role: "bgm", name: "music" },
  });
  doc.commit({ message: JSON.stringify({ planId: "plan-busy" }) });
  const push = () =>
    request("/documents/busy-doc/push", token, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: doc.export({ mode: "update", from: before }) as Uint8Array<ArrayBuffer>,
    });
  await whileLocked(async () => {
    await assertUnavailable(await push(), "push");
    await assertUnavailable(await create("busy-created"), "create");
  });
  const pushed = (await (await push()).json()) as { status?: string; duplicate?: boolean };
  assert.deepEqual(pushed.status === "committed" && pushed.duplicate !== true, true, JSON.stringify(pushed));
  assert.equal((await create("busy-created")).status, 201, "nothing was created under the lock");
  const state = (await (await request("/documents/busy-doc/plans/plan-busy", token)).json()) as {
    state?: string;
  };
  assert.equal(state.state, "applied");
});
