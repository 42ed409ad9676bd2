/**
 * Every document client call honours its abort signal against a server that never answers (a TCP
 * listener that accepts and stays silent): a signal aborted before the call rejects at once with
 * `aborted` and sends nothing; one aborted mid-wait (a waiting pull too) rejects within a moment and
 * closes the connection; the client's deadline ends a wait nobody aborts. A real document server
 * ends a waiting pull's wait as soon as its client leaves.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ToolAbortedError } from "@tackle/core";
import {
  createDocumentClient,
  type DocumentClient,
  DocumentClientError,
  timelineSchema,
} from "@tackle/docscript";
import { createSqliteDocumentStore, serveDocuments } from "@tackle/docscript/server";
import { itHonoursAbort, type SilentServer, startSilentServer, underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";

type Entry = readonly [string, (client: DocumentClient, signal: AbortSignal) => Promise<unknown>];

const entryPoints: readonly Entry[] = [
  ["pull (snapshot)", (client, signal) => client.pull("doc", { signal })],
  ["pull (waiting)", (client, signal) => client.pull("doc", { since: "v1", waitMs: 20_000, signal })],
  ["pullInto", (client, signal) => client.pullInto("doc", new LoroDoc(), { signal })],
  ["push", (client, signal) => client.push("doc", new Uint8Array([1, 2, 3]), { signal })],
  ["entities", (client, signal) => client.entities("doc", { limit: 10 }, { signal })],
  ["relations", (client, signal) => client.relations("doc", { endpoint: "e1" }, { signal })],
  ["planState", (client, signal) => client.planState("doc", "plan-1", { signal })],
  ["changes", (client, signal) => client.changes("doc", { limit: 5, signal })],
  [
    "createDocument",
    (client, signal) => client.createDocument("doc", { adminToken: "admin", token: "t", signal }),
  ],
];

const isAborted = (error: unknown) => {
  assert.ok(ToolAbortedError.isInstance(error), `expected an aborted error, got ${String(error)}`);
  assert.equal(error.code, "aborted");
  return true;
};

describe("document client against a server that never answers", () => {
  let silent: SilentServer;
  before(async () => {
    silent = await startSilentServer();
  });
  after(() => silent.close());

  for (const [name, call] of entryPoints)
    itHonoursAbort(
      { name, call },
      (url) => createDocumentClient({ origin: url, token: "t", timeoutMs: 30_000 }),
      isAborted,
    );

  it("the client's deadline ends a wait nobody aborts, as a retryable network_error", async () => {
    const quick = createDocumentClient({ origin: silent.url, timeoutMs: 150 });
    const started = performance.now();
    await assert.rejects(
      quick.pull("doc"),
      (error: unknown) =>
        DocumentClientError.isInstance(error) && error.code === "network_error" && error.retryable,
    );
    assert.ok(performance.now() - started < 1000);
    assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
  });
});

describe("a waiting pull against a real document server", () => {
  it("ends the server's wait as soon as the client aborts, not at its waitMs", async () => {
    const server = await serveDocuments({
      store: createSqliteDocumentStore({ path: ":memory:" }),
      schema: timelineSchema,
      adminToken: "admin-token-0123456789",
    });
    try {
      const client = createDocumentClient({ origin: server.url, token: "doc-token-0123456789" });
      assert.equal(
        await client.createDocument("doc", {
          adminToken: "admin-token-0123456789",
          token: "doc-token-0123456789",
        }),
        true,
      );
      const { version } = await client.pull("doc");
      // When the server's wait for this pull ends.
      let waitEnded: number | undefined;
      const updatesSince = server.host.updatesSince.bind(server.host);
      server.host.updatesSince = async (...args: Parameters<typeof updatesSince>) => {
        try {
          return await updatesSince(...args);
        } finally {
          waitEnded = performance.now();
        }
      };
      const controller = new AbortController();
      const waiting = client.pull("doc", { since: version, waitMs: 20_000, signal: controller.signal });
      waiting.catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(waitEnded, undefined, "the server is holding the pull");
      const aborted = performance.now();
      controller.abort();
      await assert.rejects(waiting, isAborted);
      const deadline = Date.now() + underLoadMs(2000);
      while (waitEnded === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.ok(waitEnded !== undefined, "the server's wait ended");
      assert.ok(
        waitEnded - aborted < underLoadMs(500),
        `the server's wait ended ${Math.round(waitEnded - aborted)} ms after`,
      );
    } finally {
      await server.close();
    }
  });
});
