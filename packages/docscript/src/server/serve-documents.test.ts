import assert from "node:assert/strict";
import { it } from "node:test";
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
