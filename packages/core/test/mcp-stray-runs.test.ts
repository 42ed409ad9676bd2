/**
 * A tool that ignores its abort signal, served by `serveMcpHttp` over real loopback HTTP with the real
 * MCP SDK client (ADR 0540): a caller who starts calls and hangs up gets its request places back each
 * time (ADR 0534), but the tool set counts the runs going on after their calls ended and refuses new
 * calls of that tool past `maxStrayRuns`, so the runs on the host stay bounded however long the flood.
 */
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { after, before, describe, it } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { z } from "zod";
import { createToolSet, defineTool } from "../src/index.ts";
import { type McpHttpServer, serveMcpHttp, toolSetFromMcp } from "../src/mcp/index.ts";

async function waitFor(what: string, condition: () => boolean, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`waited ${ms} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe("serveMcpHttp and a tool that ignores its signal", () => {
  const maxStrayRuns = 8;
  const state = { started: 0, running: 0, peak: 0 };
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let server: McpHttpServer;
  before(async () => {
    const deaf = defineTool({
      name: "deaf",
      description: "Waits for the test and never looks at its signal.",
      input: z.object({}),
      execute: async () => {
        state.started += 1;
        state.running += 1;
        state.peak = Math.max(state.peak, state.running);
        try {
          await gate;
          return "done";
        } finally {
          state.running -= 1;
        }
      },
    });
    server = await serveMcpHttp(createToolSet([deaf], { maxStrayRuns }), {
      maxInFlight: 4,
      onError: () => {},
    });
  });
  after(() => server.close());

  it("keeps a hang-up flood's runs within maxStrayRuns plus the calls in flight, refusing the rest", async () => {
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "deaf", arguments: {} },
    });
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
    };
    // 200 calls, each hung up once its tool runs (or once answered): four at a time, the server's bound.
    let sent = 0;
    const hangUps = async () => {
      while (sent < 200) {
        sent += 1;
        const startedBefore = state.started;
        const request = httpRequest(server.url, { method: "POST", headers });
        request.on("error", () => {});
        const answered = new Promise<void>((resolve) => {
          request.on("response", (response) => {
            response.resume();
            response.on("end", resolve);
            response.on("error", () => resolve());
          });
          request.on("close", () => resolve());
        });
        request.end(body);
        await Promise.race([
          answered,
          waitFor("the call to run or be answered", () => state.started > startedBefore),
        ]);
        request.destroy();
      }
    };
    await Promise.all([hangUps(), hangUps(), hangUps(), hangUps()]);
    // None of them ended (the tool waits for the test): every call that ran is a run still going. A call
    // is admitted while fewer than maxStrayRuns runs outlived theirs, so the calls in flight (four) may
    // each add one past it: the host runs at most maxStrayRuns + maxInFlight of the tool.
    assert.equal(state.running, state.started);
    assert.ok(
      state.started >= maxStrayRuns && state.started <= maxStrayRuns + 4,
      `${state.started} runs started`,
    );

    // A caller now gets a coded, retryable refusal, read as such by Tackle's MCP client (once the server
    // has seen the last hang-ups: each one aborts its call and makes its run a stray).
    const client = new Client({ name: "stray-runs-test", version: "0.1.0" });
    await client.connect(new StreamableHTTPClientTransport(server.url));
    try {
      const remote = await toolSetFromMcp(client);
      let refused = await remote.call("deaf", {}, { timeoutMs: 200 });
      const deadline = Date.now() + 5_000;
      while (refused.ok || refused.error.code !== "overloaded") {
        assert.ok(Date.now() < deadline, "the refusal within 5 s");
        refused = await remote.call("deaf", {}, { timeoutMs: 200 });
      }
      assert.equal(refused.error.retryable, true);
      assert.match(refused.error.message, /\d+ runs still going after their calls ended/);
      assert.ok(state.started <= maxStrayRuns + 4, `${state.started} runs started`);

      // Once the stray runs end, the tool runs again.
      release();
      await waitFor("the stray runs to end", () => state.running === 0);
      const startedBefore = state.started;
      const answer = await remote.call("deaf", {});
      assert.deepEqual(answer, { ok: true, output: "done" });
      assert.equal(state.started, startedBefore + 1);
    } finally {
      await client.close();
    }
  });
});
