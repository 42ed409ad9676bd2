/**
 * A waiting pull through a server whose PostgreSQL connections were lost (ADR 0489): a push another
 * server stored while this one's LISTEN connection was down goes unannounced to it, so once it
 * listens again it wakes every waiting pull, which reads the store and answers the push, instead of
 * holding the answer to the end of its `waitMs`. Server B reaches PostgreSQL through a TCP relay taken
 * down around A's push (found by `postgres-faults.property.test.ts`).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  createTestDatabase,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../src/index.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { createEditor } from "./timeline-fixture.ts";

const adminToken = "admin-token-relisten-0123456789";
const ignore = () => {};
const quiet = { debug: ignore, info: ignore, warn: ignore, error: ignore };
let database: TestDatabase;
let relay: TcpRelay;
const servers: RunningDocumentServer[] = [];

async function serverOn(connectionString: string): Promise<RunningDocumentServer> {
  const store = await createPostgresDocumentStore({ connectionString, onError: ignore });
  const server = await serveDocuments({ store, schema: timelineSchema, adminToken, logger: quiet });
  servers.push(server);
  return server;
}

before(async () => {
  database = await createTestDatabase("docscript_waiting_pull_relisten");
  relay = await startTcpRelay(database.url);
});
after(async () => {
  relay.up();
  for (const server of servers) await server.close();
  await relay.close();
  await database.drop();
});

it("a waiting pull is answered a push stored while its server's LISTEN connection was down", async () => {
  const a = await serverOn(database.url);
  const b = await serverOn(relay.url);
  const documentId = "relisten-1";
  const token = "token-relisten-0123456789abcdef";
  const writer = createEditor(a.url, documentId, token, 1);
  assert.equal(await writer.client.createDocument(documentId, { adminToken, token }), true);
  const reader = createEditor(b.url, documentId, token, 2);
  const { version } = await reader.client.pullInto(documentId, new LoroDoc());
  const waitMs = 25_000;
  const pulled = reader.client.pull(documentId, { since: version, waitMs });
  // B holds the pull and listens; then its connections go, and A stores a push meanwhile.
  await sleep(underLoadMs(300));
  relay.down();
  await sleep(underLoadMs(300));
  await writer.pull();
  const pushed = await writer.edit((session) => {
    session.entities.create({ entityKind: "track", payload: { role: "audio", name: "while B was away" } });
  });
  assert.equal(pushed.status, "committed");
  const committedAt = Date.now();
  relay.up();
  const answer = await pulled;
  const lateMs = Date.now() - committedAt;
  assert.notEqual(answer.version, version, "the pull answers the push");
  // B listens again within about a second (its retry); the pull is answered then, not at its end.
  assert.ok(lateMs < Math.min(underLoadMs(6_000), waitMs - 5_000), `answered ${lateMs} ms after the push`);
});
