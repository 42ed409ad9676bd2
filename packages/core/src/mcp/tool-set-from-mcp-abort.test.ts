/**
 * `toolSetFromMcp` honours a signal while it lists the server's tools, against a real MCP server (in
 * process) whose `tools/list` never answers: aborted before, it sends nothing; aborted mid-wait, it
 * rejects with `aborted` within a moment and the server is told to cancel the listing.
 */
import assert from "node:assert/strict";
import { availableParallelism, loadavg } from "node:os";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport, Server } from "@modelcontextprotocol/server";
import { ToolAbortedError } from "../errors/tool-aborted-error.ts";
import { toolSetFromMcp } from "./tool-set-from-mcp.ts";

async function silentListing() {
  const seen = { listings: 0, cancelled: 0 };
  const server = new Server({ name: "silent", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", (_request, context) => {
    seen.listings += 1;
    return new Promise((_, reject) => {
      context.mcpReq.signal.addEventListener("abort", () => {
        seen.cancelled += 1;
        reject(new Error("cancelled"));
      });
    });
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "test", version: "0.1.0" });
  await client.connect(clientSide);
  return {
    client,
    seen,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

const isAborted = (error: unknown) => {
  assert.ok(ToolAbortedError.isInstance(error), `expected aborted, got ${String(error)}`);
  return true;
};

test("a signal aborted before the listing rejects at once and asks the server nothing", async () => {
  const { client, seen, close } = await silentListing();
  try {
    await assert.rejects(toolSetFromMcp(client, { signal: AbortSignal.abort() }), isAborted);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(seen.listings, 0);
  } finally {
    await close();
  }
});

test("a signal aborted mid-listing rejects within a moment and the server cancels the listing", async () => {
  const { client, seen, close } = await silentListing();
  try {
    const controller = new AbortController();
    const listing = toolSetFromMcp(client, { signal: controller.signal });
    listing.catch(() => undefined);
    const deadline = Date.now() + 5000;
    while (seen.listings === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(seen.listings, 1, "the server got the listing");
    const at = performance.now();
    controller.abort();
    await assert.rejects(listing, isAborted);
    const elapsed = performance.now() - at;
    // Promptly: far under the SDK's 60 s request timeout; 1 s quiet, scaled by the machine's load
    // (core cannot use @tackle/test-support's `underLoadMs`, which depends on core).
    const loadFactor = Math.max(1, (loadavg()[0] ?? 0) / availableParallelism());
    assert.ok(elapsed < 1_000 * loadFactor, `${Math.round(elapsed)} ms after the abort`);
    while (seen.cancelled === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(seen.cancelled, 1, "the server was told to cancel");
  } finally {
    await close();
  }
});
