/**
 * A flood of pushes just under the body limit (ADR 0552), over real HTTP on a SQLite file and on
 * PostgreSQL: one document's token sends many pushes at once, each body all but its last byte. Before
 * the bound each took one of the credential's 64 places and its body was buffered whole (64 pushes of
 * 14.7 MB: 2.9 GB and 218 s of one process); now the bodies a credential has in flight on a document
 * are counted from their declared length before a byte is read, and those past `maxBodyBytes` are
 * refused 429 at once, so the server buffers at most the bound. Another document's token pushes
 * meanwhile, and once the flood goes the token's own push is committed: nothing stored is lost.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { createTestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, openDocument, timelineSchema } from "../src/index.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore, serveDocuments } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const tokens: Record<string, string> = {
  doc: "token-flood-0123456789abcdef",
  other: "token-other-0123456789abcdef",
};
const maxBodyBytes = 8 * 1024 * 1024;
const bodyLength = 3 * 1024 * 1024;
const senders = 24;

const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-bodies-"));
const databases: { drop(): Promise<void> }[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop();
});

/** A push declaring `bodyLength` bytes that sends all but the last; what the server answers, if it does. */
function almostWholePush(url: string, body: Buffer): { socket: Socket; answer: () => string } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let answer = "";
  socket.on("data", (chunk: Buffer) => {
    answer += chunk.toString("latin1");
  });
  socket.on("error", () => undefined);
  socket.write(
    `POST /documents/doc/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tokens.doc}\r\n` +
      `Content-Type: application/octet-stream\r\nContent-Length: ${bodyLength}\r\n\r\n`,
  );
  socket.write(body.subarray(0, bodyLength - 1));
  return { socket, answer: () => answer };
}

function buffersMb(): number {
  gc();
  return process.memoryUsage().arrayBuffers / 1e6;
}

async function pushTrack(origin: string, documentId: string): Promise<string> {
  const client = createDocumentClient({ origin, token: (id) => tokens[id] ?? "", maxRetries: 0 });
  const doc = new LoroDoc();
  await client.pullInto(documentId, doc);
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({ entityKind: "track", payload: { role: "bgm" } });
  doc.commit();
  const result = await client.push(documentId, doc.export({ mode: "update", from: before }));
  return result.status;
}

async function flood(store: DocumentStore): Promise<void> {
  const server = await serveDocuments({ store, schema: timelineSchema, maxBodyBytes, maxPushBytes: 4 << 20 });
  const pushes: { socket: Socket; answer: () => string }[] = [];
  try {
    for (const [documentId, token] of Object.entries(tokens))
      assert.equal(await server.host.create(documentId, token), true);
    const body = Buffer.alloc(bodyLength, 7);
    // One push first: the document open and its replica made, as before any flood.
    assert.equal(await pushTrack(server.url, "doc"), "committed");
    const baseline = buffersMb();
    for (let index = 0; index < senders; index += 1) {
      pushes.push(almostWholePush(server.url, body));
      await sleep(50);
    }
    await sleep(1_000);
    const grown = buffersMb() - baseline;
    if (process.env.TACKLE_FLOOD_FIGURES === "1") console.log(`bodies: ${grown.toFixed(1)} MB more`);
    // The bound, a body's slack and what the store and Loro may take meanwhile; every sender's body
    // buffered would be 75 MB.
    assert.ok(grown < (maxBodyBytes + 2 * bodyLength) / 1e6, `the server holds ${grown.toFixed(1)} MB more`);
    const refused = pushes.filter((push) => push.answer().startsWith("HTTP/1.1 429"));
    assert.equal(refused.length, senders - Math.floor(maxBodyBytes / bodyLength));
    assert.match(refused[0]?.answer() ?? "", /retry-after: 1/i);
    assert.match(refused[0]?.answer() ?? "", /"maxBodyBytes":8388608/);
    // Another document's token is served meanwhile.
    assert.equal(await pushTrack(server.url, "other"), "committed");
    // The flood goes: the token's own push is stored.
    for (const push of pushes) push.socket.destroy();
    await sleep(200);
    assert.equal(await pushTrack(server.url, "doc"), "committed");
  } finally {
    for (const push of pushes) push.socket.destroy();
    await server.close();
  }
}

describe("a token's request bodies in flight on a document hold at most maxBodyBytes", () => {
  it("SQLite file", async () => {
    await flood(createSqliteDocumentStore({ path: join(directory, "bodies.sqlite") }));
  });

  it("PostgreSQL", async () => {
    const database = await createTestDatabase("docscript_body_bytes");
    databases.push(database);
    await flood(await createPostgresDocumentStore({ connectionString: database.url }));
  });
});
