import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openKeptAliveSocket } from "@tackle/test-support";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { serveDocuments } from "./serve-documents.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

it("binds loopback only unless told the server is exposed", async () => {
  await assert.rejects(
    serveDocuments({
      store: createSqliteDocumentStore({ path: ":memory:" }),
      schema: timelineSchema,
      hostname: "0.0.0.0",
    }),
    (error: unknown) => DocScriptError.isInstance(error) && error.code === "refused_address",
  );
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const missing = await fetch(`${server.url}/documents/missing/snapshot`, {
      headers: { authorization: "Bearer some-token-0123456789" },
    });
    assert.equal(missing.status, 404);
  } finally {
    await server.close();
  }
});

it("refuses a push larger than maxPushBytes with 413 and stores nothing", async () => {
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
    maxPushBytes: 64,
  });
  try {
    assert.equal(await server.host.create("doc", "token-0123456789abcdef"), true);
    const before = await server.host.snapshot("doc");
    const response = await fetch(`${server.url}/documents/doc/push`, {
      method: "POST",
      headers: { authorization: "Bearer token-0123456789abcdef", "content-type": "application/octet-stream" },
      body: new Uint8Array(1000),
    });
    assert.equal(response.status, 413);
    assert.deepEqual(await server.host.snapshot("doc"), before);
  } finally {
    await server.close();
  }
});

it("refuses a chunked push past maxPushBytes while it streams, without buffering it", async () => {
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
    maxPushBytes: 1024,
  });
  try {
    assert.equal(await server.host.create("doc", "token-0123456789abcdef"), true);
    const before = await server.host.snapshot("doc");
    let sent = 0;
    // No content-length: 64 MiB announced by nothing, streamed in 64 KiB chunks.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 64 * 1024 * 1024) return controller.close();
        sent += 65_536;
        controller.enqueue(new Uint8Array(65_536));
      },
    });
    const response = await fetch(`${server.url}/documents/doc/push`, {
      method: "POST",
      headers: { authorization: "Bearer token-0123456789abcdef", "content-type": "application/octet-stream" },
      body,
      duplex: "half",
    } as RequestInit);
    assert.equal(response.status, 413);
    assert.ok(sent < 64 * 1024 * 1024, `the server stopped reading early (${sent} bytes sent)`);
    assert.deepEqual(await server.host.snapshot("doc"), before);
  } finally {
    await server.close();
  }
});

it("refuses a DNS name that merely starts with 127.", async () => {
  await assert.rejects(
    serveDocuments({
      store: createSqliteDocumentStore({ path: ":memory:" }),
      schema: timelineSchema,
      hostname: "127.attacker.example",
    }),
    /loopback only/,
  );
});

it("holds an idle kept-alive connection well past the timeout it advertises, so a client reusing one late is answered", async () => {
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  const socket = await openKeptAliveSocket(server.url);
  try {
    const ask = () =>
      socket.ask("/documents/missing/snapshot", {
        headers: "authorization: Bearer some-token-0123456789\r\n",
        answered: (answer) => /\r\n\r\n[\s\S]*\}/.test(answer),
      });
    const first = await ask();
    assert.match(first, /^HTTP\/1\.1 404/);
    assert.match(first, /\r\nkeep-alive: timeout=5\r\n/i);
    // A client told 5 s drops the connection before then (fetch at 3 s); one whose timers ran late on a
    // busy event loop reuses it later, and the server has not closed it under that request.
    await sleep(6_500);
    assert.equal(socket.closed, false, "the server closed the idle connection");
    assert.match(await ask(), /^HTTP\/1\.1 404/);
  } finally {
    socket.destroy();
    await server.close();
  }
});
