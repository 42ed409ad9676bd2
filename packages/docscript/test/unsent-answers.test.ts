/**
 * A flood of reads whose answers are never read (ADR 0552), over real HTTP on a SQLite file and on
 * PostgreSQL: one document's token asks for its snapshot on many connections and reads none of them.
 * Each answer is made whole and handed to its connection; before the bound, the request's place came
 * back as soon as it was made, so the answers piled up in the server's memory without end (200
 * connections asking a 10 MB snapshot: 1.2 GB of buffers). Now a place is held until its answer is
 * sent and a caller whose unsent answers hold `maxUnsentBytes` is refused 429 before anything more is
 * made: the server's buffers stay near the bound, another document's token is served meanwhile, and
 * the token is served again once its readers read or go. A reader that takes nothing for
 * `answerStallMs` loses its connection, giving its place back.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { createTestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../src/index.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore, serveDocuments } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const token = "token-flood-0123456789abcdef";
const otherToken = "token-other-0123456789abcdef";
const maxUnsentBytes = 16 * 1024 * 1024;
/** Connections asking the snapshot and reading nothing. */
const readers = 40;

let snapshot: Uint8Array;
const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-unsent-"));
const databases: { drop(): Promise<void> }[] = [];
before(() => {
  // About 8 MB (the sample timeline and a value in `meta`, which the mapping leaves alone; a root it
  // does not know is refused at creation, ADR 0553): past what the kernel takes of a loopback
  // connection's answer on its own.
  const doc = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  doc.getMap("meta").set("ballast", randomBytes(3_000_000).toString("base64"));
  doc.commit();
  snapshot = doc.export({ mode: "snapshot" });
});
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop();
});

/** A request on a connection that never reads its answer. */
function unreadRequest(url: string, path: string, bearer: string): Socket {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.pause();
  socket.on("error", () => undefined);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${bearer}\r\n\r\n`);
  return socket;
}

function buffersMb(): number {
  gc();
  return process.memoryUsage().arrayBuffers / 1e6;
}

async function flood(store: DocumentStore): Promise<void> {
  const server = await serveDocuments({
    store,
    schema: timelineSchema,
    maxUnsentBytes,
    answerStallMs: 60_000,
  });
  const sockets: Socket[] = [];
  try {
    assert.equal(await server.host.create("doc", token, snapshot), true);
    assert.equal(await server.host.create("other", otherToken), true);
    const get = (documentId: string, bearer: string, route = "snapshot") =>
      fetch(`${server.url}/documents/${documentId}/${route}`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
    // One read first: the document open, its first snapshot made and read.
    assert.equal((await (await get("doc", token)).arrayBuffer()).byteLength > 4_000_000, true);
    const baseline = buffersMb();
    for (let index = 0; index < readers; index += 1) {
      sockets.push(unreadRequest(server.url, "/documents/doc/snapshot", token));
      if (index % 5 === 4) await sleep(100);
    }
    await sleep(1_000);
    const grown = buffersMb() - baseline;
    const snapshotMb = snapshot.byteLength / 1e6;
    // The bound and the answers made before it was reached (one at a time, the document's queue).
    assert.ok(
      grown < maxUnsentBytes / 1e6 + 3 * snapshotMb,
      `the server holds ${grown.toFixed(0)} MB more for ${readers} unread snapshots of ${snapshotMb.toFixed(1)} MB`,
    );
    const refused = await get("doc", token, "changes");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "1");
    const body = (await refused.json()) as { error: { code: string; data: { maxUnsentBytes: number } } };
    assert.equal(body.error.code, "too_many_requests");
    assert.equal(body.error.data.maxUnsentBytes, maxUnsentBytes);
    // Another document's token is served meanwhile.
    assert.equal((await get("other", otherToken, "changes")).status, 200);
    // The readers go: their answers and places are back, and the token is served again.
    for (const socket of sockets) socket.destroy();
    assert.equal(await servedAgain(() => get("doc", token, "changes")), 200);
  } finally {
    for (const socket of sockets) socket.destroy();
    await server.close();
  }
}

/** Asks until the answer is not a refusal (places come back as the server sees the connections go). */
async function servedAgain(ask: () => Promise<Response>): Promise<number> {
  let status = 429;
  for (let attempt = 0; attempt < 200 && status === 429; attempt += 1) {
    await sleep(50);
    const again = await ask();
    status = again.status;
    await again.body?.cancel();
  }
  return status;
}

/** A reader that stops reading loses its connection after the stall time; its place comes back. */
async function stalled(store: DocumentStore): Promise<void> {
  const server = await serveDocuments({ store, schema: timelineSchema, maxInFlight: 1, answerStallMs: 300 });
  let socket: Socket | undefined;
  try {
    assert.equal(await server.host.create("doc", token, snapshot), true);
    socket = unreadRequest(server.url, "/documents/doc/snapshot", token);
    await sleep(200);
    // Its one place is held by the unread answer.
    const get = () =>
      fetch(`${server.url}/documents/doc/changes`, { headers: { authorization: `Bearer ${token}` } });
    const refused = await get();
    assert.equal(refused.status, 429);
    await refused.body?.cancel();
    // Nothing taken for the stall time: the server drops the connection, and the place is back
    // while the reader still holds its end (paused, it never reads the close).
    assert.equal(await servedAgain(get), 200);
    assert.equal(socket.destroyed, false);
  } finally {
    socket?.destroy();
    await server.close();
  }
}

describe("a token's unread answers hold its places and at most maxUnsentBytes", () => {
  it("SQLite file", async () => {
    await flood(createSqliteDocumentStore({ path: join(directory, "flood.sqlite") }));
    await stalled(createSqliteDocumentStore({ path: join(directory, "stalled.sqlite") }));
  });

  it("PostgreSQL", async () => {
    const database = await createTestDatabase("docscript_unsent_answers");
    databases.push(database);
    await flood(await createPostgresDocumentStore({ connectionString: database.url }));
    const second = await createTestDatabase("docscript_unsent_stalled");
    databases.push(second);
    await stalled(await createPostgresDocumentStore({ connectionString: second.url }));
  });
});
