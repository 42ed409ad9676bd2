/**
 * The document server's boundary, walked over every route the app registers (so a new route without a
 * guard fails here): without a token nothing is answered; with another document's token a document
 * answers exactly as one that does not exist (no probing which ids exist); creating needs the admin token.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { createDocumentClient } from "../src/client/create-document-client.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

const directory = mkdtempSync(join(tmpdir(), "docscript-boundary-"));
const adminToken = "admin-token-for-the-boundary-0123";
const documents = {
  mine: { id: "team-a.timeline", token: "token-of-team-a-0123456789" },
  theirs: { id: "team-b.timeline", token: "token-of-team-b-0123456789" },
};
let server: RunningDocumentServer;

before(async () => {
  server = await serveDocuments({
    store: createSqliteDocumentStore({ path: join(directory, "documents.sqlite") }),
    schema: timelineSchema,
    adminToken,
  });
  const admin = createDocumentClient({ origin: server.url, token: adminToken });
  for (const document of Object.values(documents)) {
    assert.equal(
      await admin.createDocument(document.id, {
        adminToken,
        token: document.token,
        snapshot: sampleTimelineSnapshot(),
      }),
      true,
    );
  }
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

/** Every (method, path) the app answers, from the app itself; middleware entries folded in. */
function routes(): { method: string; path: string }[] {
  const seen = new Map<string, { method: string; path: string }>();
  for (const route of server.app.routes) {
    if (route.method === "ALL") continue;
    seen.set(`${route.method} ${route.path}`, { method: route.method, path: route.path });
  }
  return [...seen.values()];
}

async function ask(method: string, path: string, token: string | undefined) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(method === "POST" ? { "content-type": "application/octet-stream" } : {}),
    },
    ...(method === "POST" ? { body: new Uint8Array(0) } : {}),
  });
  return { status: response.status, body: await response.text() };
}

const concrete = (path: string, documentId: string) =>
  path.replace(":documentId", encodeURIComponent(documentId)).replace(":planId", "plan-1");

test("every document route: no token 401; another document's token answers as a missing document", async () => {
  const walked = routes();
  assert.ok(walked.length >= 8, `only ${walked.length} routes found`);
  let documentRoutes = 0;
  for (const { method, path } of walked) {
    if (!path.includes(":documentId")) {
      // The one route without a document: creating, for the admin token only.
      assert.equal(`${method} ${path}`, "POST /documents", "a new route must be walked here");
      continue;
    }
    documentRoutes += 1;
    const where = `${method} ${path}`;
    const mine = concrete(path, documents.mine.id);
    const theirs = concrete(path, documents.theirs.id);
    const ghost = concrete(path, "no-such.timeline");
    // No token: nothing about the document, whether it exists or not.
    const anonymous = await ask(method, theirs, undefined);
    assert.equal(anonymous.status, 401, where);
    assert.deepEqual(await ask(method, ghost, undefined), anonymous, `${where}: 401 alike for a missing one`);
    // My token on their document: the same answer, byte for byte but the id, as a document that is not there.
    const crossed = await ask(method, theirs, documents.mine.token);
    const missing = await ask(method, ghost, documents.mine.token);
    assert.equal(crossed.status, 404, `${where}: ${crossed.body}`);
    assert.equal(
      crossed.body.replaceAll(documents.theirs.id, "ID"),
      missing.body.replaceAll("no-such.timeline", "ID"),
    );
    assert.doesNotMatch(crossed.body, /forbidden|does not open this document/);
    // A guessed token: the same.
    const guessed = await ask(method, theirs, "guessed-token-0123456789");
    assert.equal(guessed.status, 404, where);
    // My own document with my token is answered (not refused).
    const own = await ask(method, mine, documents.mine.token);
    assert.ok(
      ![401, 403, 404].includes(own.status),
      `${where} refused its own token: ${own.status} ${own.body}`,
    );
  }
  assert.ok(documentRoutes >= 7, `only ${documentRoutes} document routes walked`);
});

test("creating a document needs the admin token: a document's token cannot create or overwrite one", async () => {
  const create = (token: string | undefined, documentId: string) =>
    fetch(`${server.url}/documents`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify({ documentId, token: "a-token-i-would-like-0123" }),
    });
  assert.equal((await create(undefined, "new.timeline")).status, 401);
  assert.equal((await create(documents.mine.token, "new.timeline")).status, 403);
  assert.equal((await create(documents.mine.token, documents.theirs.id)).status, 403);
  // Nothing was created, and their document still opens with their token only.
  assert.equal(
    (await ask("GET", "/documents/new.timeline/snapshot", "a-token-i-would-like-0123")).status,
    404,
  );
  assert.equal(
    (await ask("GET", `/documents/${documents.theirs.id}/snapshot`, documents.theirs.token)).status,
    200,
  );
  assert.equal(
    (await ask("GET", `/documents/${documents.theirs.id}/snapshot`, "a-token-i-would-like-0123")).status,
    404,
  );
});
