/**
 * The console's MCP endpoint over real HTTP: 2025 sessions (one server per session, bounded, idle
 * expiry, DELETE), and session-less `tools/call` answered directly, checked against what the SDK's own
 * serving answers for the same call.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createToolSet, defineTool, silentLogger, toolContent } from "@tackle/core";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import demoTools from "../src/modules/demo.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { readJsonRpc } from "./json-rpc-response.ts";

const token = "test-token-endpoint-0123";
const extraTools = [
  defineTool({
    name: "answer",
    description: "A bare number",
    input: z.object({}),
    execute: () => 42,
  }),
  defineTool({
    name: "slow",
    description: "Answers after `ms`",
    input: z.object({ ms: z.number() }),
    execute: async ({ ms }) => {
      await sleep(ms);
      return { slept: ms };
    },
  }),
  defineTool({
    name: "picture",
    description: "An image block with a structured object beside it",
    input: z.object({}),
    execute: () =>
      toolContent([{ type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], {
        structuredContent: { width: 1 },
      }),
  }),
];
let main: RunningConsole;
let small: RunningConsole;
/** Two sessions, never idle within a test: which one a full table closes. */
let bounded: RunningConsole;

function source() {
  return createEmbeddedToolSource([
    { module: "demo", toolset: createToolSet(demoTools), errors: [], close: () => {} },
    { module: "extra", toolset: createToolSet(extraTools), errors: [], close: () => {} },
  ]);
}

before(async () => {
  const listen = { host: "127.0.0.1", port: 0 };
  main = await startConsole({ source: source(), listen, token, logger: silentLogger });
  small = await startConsole({
    source: source(),
    listen,
    token,
    logger: silentLogger,
    mcpSessions: { max: 2, idleMs: 600 },
  });
  bounded = await startConsole({
    source: source(),
    listen,
    token,
    logger: silentLogger,
    mcpSessions: { max: 2, idleMs: 60_000 },
  });
});
after(async () => {
  await main.close();
  await small.close();
  await bounded.close();
});

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

async function initialize(url: string): Promise<string> {
  const response = await post(url, {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  });
  assert.equal(response.status, 200);
  const session = response.headers.get("mcp-session-id");
  assert.ok(session, "initialize answers with an Mcp-Session-Id");
  await response.body?.cancel();
  const initialized = await post(
    url,
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
  );
  assert.equal(initialized.status, 202);
  return session;
}

function echoIn(url: string, session: string, text: string) {
  return post(
    url,
    { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "demo.echo", arguments: { text } } },
    { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
  );
}

test("a 2025 client keeps its session across calls; DELETE ends it and the id is then unknown (404)", async () => {
  const session = await initialize(main.url);
  for (const text of ["one", "two"]) {
    const response = await echoIn(main.url, session, text);
    assert.equal(response.status, 200);
    assert.deepEqual((await readJsonRpc(response)).result?.structuredContent, { text });
  }
  await closeSession(main.url, session);
  const after = await echoIn(main.url, session, "three");
  assert.equal(after.status, 404);
  assert.match(JSON.stringify(await after.json()), /Session not found/);
});

test("sessions are bounded (the least recently used is closed) and closed when idle", async () => {
  const first = await initialize(small.url);
  const second = await initialize(small.url);
  // Using the first makes the second the least recently used.
  assert.equal((await echoIn(small.url, first, "a")).status, 200);
  const third = await initialize(small.url);
  assert.equal((await echoIn(small.url, second, "b")).status, 404, "the least recently used went");
  for (const kept of [first, third]) {
    const response = await echoIn(small.url, kept, "c");
    assert.equal(response.status, 200);
    await response.body?.cancel();
  }
  await sleep(1200);
  for (const idle of [first, third]) {
    assert.equal((await echoIn(small.url, idle, "d")).status, 404, "an idle session is closed");
  }
});

function slowIn(url: string, session: string, ms: number) {
  return post(
    url,
    { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "extra.slow", arguments: { ms } } },
    { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
  );
}

test("a full table closes an idle session before one whose call is running, whose answer comes (ADR 0279)", async () => {
  const running = await initialize(bounded.url);
  const call = await slowIn(bounded.url, running, 800);
  assert.equal(call.status, 200, "the call's stream is open");
  // The session with the running call is the least recently used by its last request.
  const idle = await initialize(bounded.url);
  const third = await initialize(bounded.url);
  // Before: the running call's session was closed and its answer never came.
  assert.deepEqual((await readJsonRpc(call))?.result?.structuredContent, { slept: 800 });
  assert.equal((await echoIn(bounded.url, idle, "gone")).status, 404, "the idle session went");
  for (const kept of [running, third]) {
    const response = await echoIn(bounded.url, kept, "kept");
    assert.deepEqual((await readJsonRpc(response)).result?.structuredContent, { text: "kept" });
  }
  for (const session of [running, third]) await closeSession(bounded.url, session);
});

test("an answer makes its session the most recently used (ADR 0279)", async () => {
  const answered = await initialize(bounded.url);
  const call = await slowIn(bounded.url, answered, 300);
  const opened = await initialize(bounded.url);
  // Answered after the second session opened: the first is now the more recently used.
  assert.deepEqual((await readJsonRpc(call))?.result?.structuredContent, { slept: 300 });
  const third = await initialize(bounded.url);
  // Before: the first went, its last request being older than the second's initialize.
  assert.equal((await echoIn(bounded.url, opened, "gone")).status, 404, "the other session went");
  const response = await echoIn(bounded.url, answered, "kept");
  assert.deepEqual((await readJsonRpc(response)).result?.structuredContent, { text: "kept" });
  for (const session of [answered, third]) await closeSession(bounded.url, session);
});

async function closeSession(url: string, session: string): Promise<void> {
  const closed = await fetch(url, {
    method: "DELETE",
    headers: {
      authorization: `Bearer ${token}`,
      "mcp-session-id": session,
      "mcp-protocol-version": "2025-06-18",
    },
  });
  assert.equal(closed.status, 200);
}

const modernMeta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

function modernCall(name: string, args: unknown, extraMeta: Record<string, unknown> = {}) {
  return post(
    main.url,
    {
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name, arguments: args, _meta: { ...modernMeta, ...extraMeta } },
    },
    { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name },
  );
}

function legacyCall(name: string, args: unknown, meta?: Record<string, unknown>) {
  return post(
    main.url,
    {
      jsonrpc: "2.0",
      id: 8,
      method: "tools/call",
      params: { name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) },
    },
    { "mcp-protocol-version": "2025-06-18" },
  );
}

const calls: readonly [string, unknown][] = [
  ["demo.echo", { text: "héllo" }],
  ["demo.add", { numbers: "nope" }],
  ["demo.nope", {}],
  ["extra.answer", {}],
  ["extra.picture", {}],
  ["tackle.modules", {}],
];

test("a session whose call runs past the idle time is not closed under it: the call is answered, the session kept", async () => {
  const session = await initialize(small.url);
  // The idle time is 600 ms, swept every 250 ms: the call runs through several sweeps.
  const response = await post(
    small.url,
    { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "extra.slow", arguments: { ms: 1_500 } } },
    { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
  );
  assert.equal(response.status, 200);
  assert.deepEqual((await readJsonRpc(response))?.result?.structuredContent, { slept: 1_500 });
  // Its idle time counts from the answer: the session is still there.
  const after = await echoIn(small.url, session, "still here");
  assert.equal(after.status, 200);
  assert.deepEqual((await readJsonRpc(after)).result?.structuredContent, { text: "still here" });
});

test("a session-less tools/call is answered directly, as the SDK's serving answers it (2026-07-28 and 2025)", async () => {
  for (const [name, args] of calls) {
    // A progress token is one of the things the direct path leaves to the SDK: the same call both ways.
    const direct = await modernCall(name, args);
    const viaSdk = await modernCall(name, args, { progressToken: "p" });
    assert.equal(direct.headers.get("content-type"), "application/json", `${name}: one JSON body`);
    assert.deepEqual(await readJsonRpc(direct), await readJsonRpc(viaSdk), `${name} on 2026-07-28`);

    const legacyDirect = await legacyCall(name, args);
    const legacyViaSdk = await legacyCall(name, args, { progressToken: "p" });
    assert.equal(legacyDirect.headers.get("content-type"), "application/json");
    assert.match(legacyViaSdk.headers.get("content-type") ?? "", /text\/event-stream/);
    assert.deepEqual(
      await readJsonRpc(legacyDirect),
      await readJsonRpc(legacyViaSdk),
      `${name} on 2025-06-18`,
    );
  }
  const echoed = await readJsonRpc(await modernCall("demo.echo", { text: "x" }));
  assert.deepEqual(echoed.result?.structuredContent, { text: "x" });
  assert.equal(echoed.result?.resultType, "complete");
});

test("a direct call whose headers disagree with its body gets the SDK's refusal, not a result", async () => {
  const response = await post(
    main.url,
    {
      jsonrpc: "2.0",
      id: 9,
      method: "tools/call",
      params: { name: "demo.echo", arguments: { text: "x" }, _meta: modernMeta },
    },
    { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "demo.add" },
  );
  assert.equal(response.status, 400);
  const answer = await readJsonRpc(response);
  assert.equal(answer.result, undefined);
  assert.ok(answer.error, "a JSON-RPC error");
});

test("the direct path sits behind the guards: no token, a wrong one, a foreign Origin", async () => {
  const body = {
    jsonrpc: "2.0",
    id: 10,
    method: "tools/call",
    params: { name: "demo.echo", arguments: { text: "x" }, _meta: modernMeta },
  };
  const headers = {
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "demo.echo",
  };
  const none = await post(main.url, body, { ...headers, authorization: "" });
  assert.equal(none.status, 401);
  assert.equal(((await none.json()) as { error: { code: string } }).error.code, "unauthorized");
  const wrong = await post(main.url, body, { ...headers, authorization: "Bearer wrong" });
  assert.equal(wrong.status, 401);
  assert.equal(((await wrong.json()) as { error: { code: string } }).error.code, "invalid_token");
  const foreign = await post(main.url, body, { ...headers, origin: "http://evil.example" });
  assert.equal(foreign.status, 403);
  await foreign.body?.cancel();
});
