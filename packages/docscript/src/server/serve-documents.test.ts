import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openKeptAliveSocket } from "@tackle/test-support";
import { sameVersion } from "../document/version.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import type { RowLookupAnswer } from "./document-host.ts";
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

it("answers stored rows by id and by member query at its version, and refuses malformed lookups with 400", async () => {
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  const token = "token-0123456789abcdef";
  const rows = (lookups: unknown, authorization = `Bearer ${token}`) =>
    fetch(`${server.url}/documents/doc/rows`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ lookups }),
    });
  try {
    assert.equal(await server.host.create("doc", token, sampleTimelineSnapshot()), true);
    const { version } = await server.host.snapshot("doc");
    const response = await rows([
      { rows: "entities", ids: ["track-1", "no-such-row"] },
      { members: "relation", endpoint: "track-1", kinds: ["contain"], limit: 1000 },
    ]);
    assert.equal(response.status, 200);
    const answer = (await response.json()) as RowLookupAnswer;
    assert.ok(sameVersion(answer.version, version));
    assert.ok((answer.counts.entities.track ?? 0) >= 1);
    const [byId, held] = answer.results;
    assert.deepEqual(
      byId?.rows.map((row) => [row.root, row.rowId, (row.json as { kind?: unknown }).kind]),
      [["entities", "track-1", "track"]],
    );
    assert.ok((held?.found ?? 0) >= 1);
    assert.ok(
      held?.rows.every(
        (row) =>
          row.root === "relations" &&
          (row.json as { kind?: unknown; endpoint0?: unknown }).kind === "contain" &&
          (row.json as { endpoint0?: unknown }).endpoint0 === "track-1",
      ),
    );

    assert.equal((await rows([], "Bearer wrong-token-0123456789")).status, 404);
    for (const bad of [
      "not a list",
      [{ members: "entity", limit: 0 }],
      [{ members: "entity", limit: 5001 }],
      [{ rows: "entities", ids: Array.from({ length: 1001 }, (_, index) => `id-${index}`) }],
      [{ members: "clip", limit: 10 }],
      [{ members: "entity", endpoint: 7, limit: 10 }],
      Array.from({ length: 65 }, () => ({ rows: "entities", ids: [] })),
    ]) {
      const refused = await rows(bad);
      assert.equal(refused.status, 400, JSON.stringify(bad).slice(0, 80));
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "invalid_input");
    }
  } finally {
    await server.close();
  }
});

it("answers the document's issues with its rows when asked (a page's head), and refuses a non-boolean", async () => {
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  const token = "token-0123456789abcdef";
  const rows = (body: unknown) =>
    fetch(`${server.url}/documents/doc/rows`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  try {
    assert.equal(await server.host.create("doc", token, sampleTimelineSnapshot()), true);
    // The head an entity page answers: version, counts and issues, as the rows answer them when asked.
    const head = await server.host.entityPage("doc", { limit: 0 });
    const asked = (await (
      await rows({ lookups: [{ members: "entity", kinds: ["clip"], limit: 2 }], issues: true })
    ).json()) as RowLookupAnswer;
    assert.ok(Array.isArray(asked.issues));
    assert.deepEqual(asked.issues, head.issues);
    assert.equal(asked.version, head.version);
    assert.deepEqual(asked.counts, head.counts);
    assert.equal(asked.results[0]?.found, 2);
    const plain = (await (await rows({ lookups: [] })).json()) as RowLookupAnswer;
    assert.equal(plain.issues, undefined);

    const refused = await rows({ lookups: [], issues: "yes" });
    assert.equal(refused.status, 400);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "invalid_input");
  } finally {
    await server.close();
  }
});
