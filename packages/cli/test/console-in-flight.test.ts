/**
 * The console bounds what each credential holds at once (ADR 0270), over real loopback HTTP with the
 * real MCP SDK client: past `maxInFlight` the bearer token's request is answered 429 with
 * `Retry-After: 1` and a JSON-RPC error before its body is read (readable through the SDK, on the wire,
 * and through the console tool source as `overloaded`), the held calls answer as usual, and every place
 * comes back once the calls end, their clients abort or leave mid-body. Event streams (a 2025
 * session's `GET`, a 2026-07-28 listen) have their own bound and take no call's place; the signed-in
 * web page has places of its own, so a flood on the token leaves the page working.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { type ClientRequest, request as httpRequest, type IncomingMessage } from "node:http";
import { after, before, test } from "node:test";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createToolSet, defineTool, silentLogger, ToolError } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createConsoleToolSource } from "../src/tool-source/create-console-tool-source.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import type { ToolSource } from "../src/tool-source/tool-source.ts";

const token = "console-in-flight-token-0123456789";
const maxInFlight = 3;
const maxStreams = 2;
let running = 0;
let aborted = 0;
let gates: (() => void)[] = [];

/** Runs until the test opens the gates, or its call is aborted. */
const hold = defineTool({
  name: "hold",
  description: "Answers when the test lets it",
  input: z.object({ label: z.string() }),
  timeoutMs: 120_000,
  execute: ({ label }, context) =>
    new Promise((resolve, reject) => {
      running += 1;
      let over = false;
      const end = () => {
        if (over) return false;
        over = true;
        running -= 1;
        return true;
      };
      gates.push(() => end() && resolve({ label }));
      context.signal.addEventListener("abort", () => {
        if (!end()) return;
        aborted += 1;
        reject(context.signal.reason);
      });
    }),
});

function openGates(): void {
  const open = gates;
  gates = [];
  for (const gate of open) gate();
}

let server: RunningConsole;
let consoleSource: ToolSource;
let self = "";

before(async () => {
  server = await startConsole({
    source: createEmbeddedToolSource([
      { module: "gate", toolset: createToolSet([hold]), errors: [], close: () => {} },
    ]),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
    maxInFlight,
    maxStreams,
  });
  self = `http://127.0.0.1:${server.port}`;
  consoleSource = await createConsoleToolSource({ url: server.url, token });
});
after(async () => {
  openGates();
  await consoleSource?.close();
  await server?.close();
});

async function waitFor(what: string, condition: () => boolean, ms = underLoadMs(10_000)): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`waited ${ms} ms for ${what} (running ${running})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function connect(mode: "legacy" | { pin: "2026-07-28" } = { pin: "2026-07-28" }): Promise<Client> {
  const client = new Client({ name: "in-flight-test", version: "0.1.0" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const callHold = (client: Client, label: string, signal?: AbortSignal) =>
  client.callTool(
    { name: "gate.hold", arguments: { label } },
    signal === undefined ? {} : { signal },
  ) as Promise<CallToolResult>;

/** The refusal as the SDK client throws it: status 429, the console's JSON-RPC error in its text. */
function assertRefused(error: unknown): true {
  const http = error as Error & { data?: { status?: number; text?: string } };
  assert.equal(http.data?.status, 429, String(error));
  assert.deepEqual(JSON.parse(http.data?.text ?? ""), {
    jsonrpc: "2.0",
    error: {
      code: -32000,
      message: `The console is serving ${maxInFlight} requests for this bearer token already, its most at once; retry in 1 s`,
      data: { code: "overloaded", retryable: true, retryAfterSeconds: 1, maxInFlight },
    },
    id: null,
  });
  return true;
}

/** A POST that declares a body of `bytes` and sends `sent` of them, to be answered or dropped. */
function partialPost(bytes: number, sent: number, headers: Record<string, string> = {}): ClientRequest {
  const outgoing = httpRequest(server.url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
      authorization: `Bearer ${token}`,
      "content-length": String(bytes),
      ...headers,
    },
  });
  outgoing.on("error", () => {}); // the tests that hang up expect the socket to go
  outgoing.flushHeaders();
  if (sent > 0) outgoing.write("x".repeat(sent));
  return outgoing;
}

async function answerOf(outgoing: ClientRequest, ms = underLoadMs(5_000)) {
  const timer = setTimeout(() => outgoing.destroy(new Error(`no answer within ${ms} ms`)), ms);
  const [response] = (await once(outgoing, "response")) as [IncomingMessage];
  let text = "";
  for await (const chunk of response) text += String(chunk);
  clearTimeout(timer);
  return { status: response.statusCode ?? 0, headers: response.headers, text };
}

/** Exactly `maxInFlight` calls run at once for the token: that many start, one more is refused. */
async function assertFullCapacity(client: Client): Promise<void> {
  const calls = Array.from({ length: maxInFlight }, (_, index) => callHold(client, `again-${index}`));
  await waitFor(`${maxInFlight} calls running`, () => running === maxInFlight);
  await assert.rejects(callHold(client, "one too many"), assertRefused);
  openGates();
  for (const result of await Promise.all(calls)) assert.equal(result.isError, undefined);
  await waitFor("no call running", () => running === 0);
}

test("past the token's places a call is refused 429 before its body is read, readable by the SDK, the wire and the console source; the held calls answer", async () => {
  const client = await connect();
  try {
    const held = Array.from({ length: maxInFlight }, (_, index) => callHold(client, `held-${index}`));
    await waitFor(`${maxInFlight} calls running`, () => running === maxInFlight);

    await assert.rejects(callHold(client, "refused"), assertRefused);
    // On the wire, for a body of 1 MiB of which not a byte was sent: answered at once all the same.
    const wire = await answerOf(partialPost(1024 * 1024, 0));
    assert.equal(wire.status, 429);
    assert.equal(wire.headers["retry-after"], "1");
    assert.equal(JSON.parse(wire.text).error.data.code, "overloaded");
    // A small POST is still read while every place is held: a notification (a cancel, say) or the
    // client's answer to a held call's question gets through; a request is refused once read.
    const cancel = await fetch(server.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${token}`,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: 99, reason: "none such" },
      }),
    });
    assert.equal(cancel.status, 202, await cancel.text());
    // Through `tackle call --console` and `tackle mcp --console`: a retryable `overloaded`.
    const viaSource = await consoleSource.call("gate.hold", { label: "via source" });
    assert.equal(viaSource.ok, false);
    const error = viaSource.ok ? undefined : viaSource.error;
    assert.ok(ToolError.isInstance(error));
    assert.equal(error.code, "overloaded");
    assert.equal(error.retryable, true);
    assert.match(error.message, /serving 3 requests for this bearer token already.*retry in 1 s/);
    assert.equal(running, maxInFlight, "no refused call ran");

    openGates();
    const answers = await Promise.all(held);
    assert.deepEqual(
      answers.map((answer) => answer.structuredContent),
      [{ label: "held-0" }, { label: "held-1" }, { label: "held-2" }],
    );
    await assertFullCapacity(client);
  } finally {
    await client.close();
  }
});

for (const [label, mode] of [
  ["2026-07-28", { pin: "2026-07-28" }],
  ["2025 session", "legacy"],
] as const)
  test(`places come back when ${label} clients abort their calls or leave mid-body, round after round`, async () => {
    const client = await connect(mode);
    try {
      for (let round = 0; round < 3; round++) {
        const controller = new AbortController();
        const calls = [0, 1].map((index) => callHold(client, `abort-${round}-${index}`, controller.signal));
        await waitFor("two calls running", () => running === 2);
        // The third place: a body that never finishes arriving.
        const trickle = partialPost(4096, 100);
        const refused = await answerOf(partialPost(1024 * 1024, 0));
        assert.equal(refused.status, 429, "the body trickling in holds a place");
        const abortedBefore = aborted;
        controller.abort();
        for (const call of calls) await assert.rejects(call);
        trickle.destroy();
        await waitFor("the tools' signals aborted", () => aborted === abortedBefore + 2);
        await assertFullCapacity(client);
      }
    } finally {
      await client.close();
    }
  });

/** A 2025 session, initialized raw: its id. */
async function initializeSession(): Promise<string> {
  const initialized = await fetch(server.url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    }),
  });
  await initialized.text();
  const session = initialized.headers.get("mcp-session-id") ?? "";
  assert.notEqual(session, "", `initialize answered ${initialized.status}`);
  return session;
}

/** The session's event stream: a `GET` whose body stays open until `close()`. */
async function openSessionStream(session: string): Promise<{ status: number; close(): void }> {
  const controller = new AbortController();
  const stream = await fetch(server.url, {
    headers: {
      accept: "text/event-stream",
      authorization: `Bearer ${token}`,
      "mcp-session-id": session,
      "mcp-protocol-version": "2025-06-18",
    },
    signal: controller.signal,
  });
  if (stream.status !== 200) await stream.text();
  return { status: stream.status, close: () => controller.abort() };
}

test("event streams hold places of their own: admitted while calls fill theirs, taking none of them, and refused past their bound while calls go on", async () => {
  const client = await connect();
  const listener = await connect();
  const sessions = [await initializeSession(), await initializeSession()];
  try {
    const calls = Array.from({ length: maxInFlight }, (_, index) => callHold(client, `call-${index}`));
    await waitFor(`${maxInFlight} calls running`, () => running === maxInFlight);
    // Every call's place is held; a 2025 session's stream and a 2026-07-28 listen still open.
    const sessionStream = await openSessionStream(sessions[0] as string);
    assert.equal(sessionStream.status, 200);
    // A call that names itself a listen in its header is a call once its body is read: refused, not run.
    const posing = await fetch(server.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${token}`,
        "mcp-protocol-version": "2025-06-18",
        "mcp-method": "subscriptions/listen",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "gate.hold", arguments: { label: "posing" } },
      }),
    });
    assert.equal(posing.status, 429);
    assert.match((await posing.json()).error.message, /serving 3 requests for this bearer token/);
    const subscription = await listener.listen({ resourceSubscriptions: ["gate://held"] });
    await assert.rejects(callHold(client, "still full"), assertRefused);

    // Past maxStreams: a third stream of either kind is refused, in words about streams.
    const third = await openSessionStream(sessions[1] as string);
    assert.equal(third.status, 429, "a third stream past maxStreams");
    await assert.rejects(listener.listen({ resourceSubscriptions: ["gate://held"] }), (error: Error) => {
      assert.match(error.message, /holds 2 event streams open for this bearer token already/);
      return true;
    });
    assert.equal(running, maxInFlight, "nothing refused ran");
    openGates();
    await Promise.all(calls);
    await waitFor("no call running", () => running === 0);
    // With both streams open, every call's place is there.
    await assertFullCapacity(client);

    sessionStream.close();
    await subscription.close();
    // Both streams' places come back once the console sees them go: two streams open again.
    const deadline = Date.now() + underLoadMs(10_000);
    const reopened: Awaited<ReturnType<typeof openSessionStream>>[] = [];
    while (reopened.length < maxStreams) {
      const stream = await openSessionStream(sessions[reopened.length] as string);
      if (stream.status === 200) reopened.push(stream);
      else if (Date.now() > deadline) assert.fail(`a stream's place did not come back (${stream.status})`);
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const stream of reopened) stream.close();
  } finally {
    await client.close();
    await listener.close();
  }
});

test("a 2025 session's call keeps its place after its client drops the stream, until it is answered", async () => {
  const client = await connect();
  const session = await initializeSession();
  const sessionHeaders = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    authorization: `Bearer ${token}`,
    "mcp-session-id": session,
    "mcp-protocol-version": "2025-06-18",
  };
  try {
    await (
      await fetch(server.url, {
        method: "POST",
        headers: sessionHeaders,
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      })
    ).text();
    const controller = new AbortController();
    const dropped = await fetch(server.url, {
      method: "POST",
      headers: sessionHeaders,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "gate.hold", arguments: { label: "dropped" } },
      }),
      signal: controller.signal,
    });
    assert.equal(dropped.status, 200);
    await waitFor("the session's call running", () => running === 1);
    const abortedBefore = aborted;
    controller.abort();
    // On a session a dropped stream is no cancel: the call runs on, and keeps its place.
    const others = [0, 1].map((index) => callHold(client, `beside-${index}`));
    await waitFor("three calls running", () => running === maxInFlight);
    await assert.rejects(callHold(client, "no place"), assertRefused);
    assert.equal(aborted, abortedBefore, "the session's call still runs");
    openGates();
    await Promise.all(others);
    await waitFor("no call running", () => running === 0);
    await assertFullCapacity(client);
  } finally {
    await client.close();
    await fetch(server.url, { method: "DELETE", headers: sessionHeaders }).then((answer) => answer.text());
  }
});

/** The page's sign-in: the one-time code for a session cookie. */
async function signIn(): Promise<string> {
  const code = server.signInUrl.split("#login=")[1] ?? "";
  const answer = await fetch(`${self}/api/session`, {
    method: "POST",
    headers: { origin: self, "content-type": "application/json" },
    body: JSON.stringify({ code }),
  });
  assert.equal(answer.status, 200, await answer.text());
  return (answer.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

const pageCall = (cookie: string, label: string) =>
  fetch(`${self}/api/call/stream`, {
    method: "POST",
    headers: { cookie, origin: self, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ tool: "gate.hold", args: { label } }),
  });

test("the signed-in page has places of its own: a flood on the token leaves it working, and its own bound answers in its API's shape", async () => {
  const client = await connect();
  const cookie = await signIn();
  try {
    const tokenCalls = Array.from({ length: maxInFlight }, (_, index) => callHold(client, `token-${index}`));
    await waitFor("the token's calls running", () => running === maxInFlight);
    await assert.rejects(callHold(client, "token refused"), assertRefused);

    const pageCalls = await Promise.all(
      Array.from({ length: maxInFlight }, (_, index) => pageCall(cookie, `page-${index}`)),
    );
    for (const answer of pageCalls) assert.equal(answer.status, 200);
    await waitFor("the page's calls running too", () => running === 2 * maxInFlight);
    const refused = await pageCall(cookie, "page refused");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.deepEqual(await refused.json(), {
      error: {
        code: "overloaded",
        message: `The console is serving ${maxInFlight} requests for the signed-in web page already, its most at once; retry in 1 s`,
        data: { retryable: true, retryAfterSeconds: 1, maxInFlight },
      },
    });
    // The page's live status is a stream: its own places, not a call's.
    const controller = new AbortController();
    const events = await fetch(`${self}/api/events`, {
      headers: { cookie, accept: "text/event-stream" },
      signal: controller.signal,
    });
    assert.equal(events.status, 200);
    controller.abort();

    openGates();
    for (const answer of pageCalls) assert.match(await answer.text(), /event: answer/);
    await Promise.all(tokenCalls);
    await waitFor("no call running", () => running === 0);
    // The page's places are back.
    const again = await Promise.all(
      Array.from({ length: maxInFlight }, (_, index) => pageCall(cookie, `again-${index}`)),
    );
    for (const answer of again) assert.equal(answer.status, 200);
    await waitFor("the page's calls running again", () => running === maxInFlight);
    openGates();
    for (const answer of again) await answer.text();
  } finally {
    await client.close();
  }
});
