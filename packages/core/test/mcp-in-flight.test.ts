/**
 * `serveMcpHttp` serves a bounded number of requests at once (ADR 0534), over real loopback HTTP with
 * the real MCP SDK client: past `maxInFlight` a POST is answered 429 with `Retry-After: 1` and a
 * JSON-RPC error before its body is read, the held calls finish as usual, and every place comes back —
 * after an answer, an error, a client that hung up mid-call or mid-body — so the full capacity is there
 * again after many of them.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { type ClientRequest, request as httpRequest, type IncomingMessage } from "node:http";
import { after, before, describe, it } from "node:test";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { z } from "zod";
import { createToolSet, defineTool } from "../src/index.ts";
import { type McpHttpServer, serveMcpHttp, toolSetFromMcp } from "../src/mcp/index.ts";

const revisions = [
  { label: "2025-11-25", mode: "legacy" as const },
  { label: "2026-07-28", mode: { pin: "2026-07-28" } as const },
];

/** A tool that runs until the test opens its gate (or the call is aborted), and one that throws. */
function gatedTools() {
  const started: string[] = [];
  const aborted: string[] = [];
  let open = () => {};
  let gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const toolset = createToolSet([
    defineTool({
      name: "slow",
      description: "Answers when the test lets it.",
      input: z.object({ label: z.string() }),
      execute: async ({ label }, context) => {
        started.push(label);
        const abort = once(context.signal, "abort").then(() => aborted.push(label));
        await Promise.race([gate, abort]);
        return `done ${label}`;
      },
    }),
    defineTool({
      name: "broken",
      description: "Always fails.",
      input: z.object({}),
      execute: () => {
        throw new Error("broken on purpose");
      },
    }),
  ]);
  return {
    toolset,
    started,
    aborted,
    /** Lets every running call answer; later calls wait again. */
    openGate() {
      open();
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
  };
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`waited ${ms} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function connect(url: URL, mode: (typeof revisions)[number]["mode"] = { pin: "2026-07-28" }) {
  const client = new Client({ name: "in-flight-test", version: "0.1.0" }, { versionNegotiation: { mode } });
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

const callSlow = (client: Client, label: string, signal?: AbortSignal) =>
  client.callTool(
    { name: "slow", arguments: { label } },
    signal === undefined ? {} : { signal },
  ) as Promise<CallToolResult>;

const textOf = (result: CallToolResult) => (result.content[0] as { text: string }).text;

/** A 2025-era `tools/call` as one raw POST (a stateless endpoint takes it without a handshake). */
function rawCall(url: URL, label: string, headers: Record<string, string> = {}): ClientRequest {
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "slow", arguments: { label } },
  });
  const request = httpRequest(url, { method: "POST", headers: { ...jsonHeaders, ...headers } });
  request.on("error", () => {}); // the tests that hang up expect the socket to go
  request.end(body);
  return request;
}

const jsonHeaders = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": "2025-06-18",
};

async function answerOf(request: ClientRequest) {
  const [response] = (await once(request, "response")) as [IncomingMessage];
  let text = "";
  for await (const chunk of response) text += String(chunk);
  return { status: response.statusCode ?? 0, headers: response.headers, text };
}

/** The refusal as the SDK client throws it: status 429, the server's JSON-RPC error in its text. */
function assertRefused(error: unknown, maxInFlight: number): true {
  const http = error as Error & { status?: number; data?: { status?: number; text?: string } };
  assert.equal(http.data?.status, 429, String(error));
  assert.match(http.message, new RegExp(`serving ${maxInFlight} requests already.*retry in 1 s`));
  const body = JSON.parse(http.data?.text ?? "");
  assert.deepEqual(body, {
    jsonrpc: "2.0",
    error: {
      code: -32000,
      message: `This MCP endpoint is serving ${maxInFlight} requests already, its most at once; retry in 1 s`,
      data: { code: "overloaded", retryable: true, retryAfterSeconds: 1, maxInFlight },
    },
    id: null,
  });
  return true;
}

/**
 * Exactly `maxInFlight` places are there: that many calls held at once run, one more is refused, and
 * the held ones answer once let go.
 */
async function assertFullCapacity(
  server: McpHttpServer,
  tools: ReturnType<typeof gatedTools>,
  maxInFlight: number,
): Promise<void> {
  const client = await connect(server.url);
  try {
    const before = tools.started.length;
    // A place is back once the server has seen its request end; a call refused before that is sent
    // again a moment later, as a client honouring Retry-After would.
    const deadline = Date.now() + 10_000;
    const hold = async (label: string): Promise<CallToolResult> => {
      for (;;) {
        try {
          return await callSlow(client, label);
        } catch (error) {
          if ((error as { data?: { status?: number } }).data?.status !== 429 || Date.now() > deadline) {
            throw error;
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    };
    const held = Array.from({ length: maxInFlight }, (_, index) => hold(`capacity-${index}`));
    await waitFor(`${maxInFlight} calls running`, () => tools.started.length - before === maxInFlight);
    await assert.rejects(callSlow(client, "one-too-many"), (error) => assertRefused(error, maxInFlight));
    tools.openGate();
    const answers = await Promise.all(held);
    assert.deepEqual(
      answers.map(textOf),
      held.map((_, index) => JSON.stringify(`done capacity-${index}`)),
    );
    assert.ok(!tools.started.includes("one-too-many"), "the refused call never ran");
  } finally {
    await client.close();
  }
}

/** The server the bounded tests share, set up once before them with room for `maxInFlight` calls. */
interface Bounded {
  readonly maxInFlight: number;
  tools: ReturnType<typeof gatedTools>;
  server: McpHttpServer;
}

/** Past the bound a call is refused at `revision`, through every client; the held ones finish. */
function itRefusesPastTheBound(bounded: Bounded, revision: (typeof revisions)[number]): void {
  const { maxInFlight } = bounded;
  it(`refuses the call past ${maxInFlight} held ones with 429, at protocol ${revision.label}; the held ones finish and new calls pass`, async () => {
    const { server, tools } = bounded;
    const client = await connect(server.url, revision.mode);
    const remote = await toolSetFromMcp(client);
    try {
      const before = tools.started.length;
      const held = Array.from({ length: maxInFlight }, (_, index) => callSlow(client, `held-${index}`));
      await waitFor("the held calls running", () => tools.started.length - before === maxInFlight);

      await assert.rejects(callSlow(client, "refused"), (error) => assertRefused(error, maxInFlight));
      // Through Tackle's own MCP client: a coded, retryable error a model or a program acts on.
      const refused = await remote.call("slow", { label: "refused-remote" });
      assert.ok(!refused.ok);
      assert.equal(refused.error.code, "overloaded");
      assert.equal(refused.error.retryable, true);
      assert.deepEqual(refused.error.data, { tool: "slow", retryAfterSeconds: 1 });
      assert.match(refused.error.message, /refused the call to "slow" \(HTTP 429\): .*retry in 1 s/);
      // On the wire: 429, Retry-After, a JSON-RPC error without an id (the body was not read).
      const raw = await answerOf(rawCall(server.url, "refused-raw"));
      assert.equal(raw.status, 429);
      assert.equal(raw.headers["retry-after"], "1");
      assert.equal(raw.headers["content-type"], "application/json");
      assert.equal(JSON.parse(raw.text).id, null);
      // Any method with a body counts (the adapter reads it before the endpoint answers 405); a GET not.
      const put = httpRequest(server.url, { method: "PUT", headers: jsonHeaders });
      put.end("{}");
      assert.equal((await answerOf(put)).status, 429);
      const get = httpRequest(server.url, { method: "GET", headers: jsonHeaders });
      get.end();
      assert.equal((await answerOf(get)).status, 405);
      assert.equal(tools.started.length - before, maxInFlight, "no refused call ran");

      tools.openGate();
      const answers = await Promise.all(held);
      assert.deepEqual(
        answers.map(textOf),
        held.map((_, index) => JSON.stringify(`done held-${index}`)),
      );
      // The places are back: a call now passes, through the SDK and through the tool set.
      const next = callSlow(client, `after-${revision.label}`);
      await waitFor("the next call running", () => tools.started.includes(`after-${revision.label}`));
      tools.openGate();
      assert.equal(textOf(await next), JSON.stringify(`done after-${revision.label}`));
      const viaRemote = remote.call("slow", { label: `remote-${revision.label}` });
      await waitFor("the remote call running", () => tools.started.includes(`remote-${revision.label}`));
      tools.openGate();
      assert.deepEqual(await viaRemote, { ok: true, output: `done remote-${revision.label}` });
    } finally {
      await client.close();
    }
    await assertFullCapacity(server, tools, maxInFlight);
  });
}

/** Every way a request can fail gives its place back. */
function itGivesThePlaceBackOnFailure(bounded: Bounded): void {
  const { maxInFlight } = bounded;
  it("gives the place back when a request fails, whatever failed", async () => {
    const { server, tools } = bounded;
    const client = await connect(server.url);
    try {
      for (let round = 0; round < 3 * maxInFlight; round += 1) {
        const failed = await client.callTool({ name: "broken", arguments: {} });
        assert.equal(failed.isError, true);
        // A protocol error: the SDK client rejects with the server's JSON-RPC error.
        await assert.rejects(client.callTool({ name: "no.such.tool", arguments: {} }), /not found/);
        const notJson = httpRequest(server.url, { method: "POST", headers: jsonHeaders });
        notJson.end("{not json");
        assert.equal((await answerOf(notJson)).status, 400);
        const notJsonType = httpRequest(server.url, {
          method: "POST",
          headers: { ...jsonHeaders, "content-type": "text/plain" },
        });
        notJsonType.end("hello");
        assert.equal((await answerOf(notJsonType)).status, 415);
        const put = httpRequest(server.url, { method: "PUT", headers: jsonHeaders });
        put.end("{}");
        assert.equal((await answerOf(put)).status, 405);
        const tooLarge = httpRequest(server.url, {
          method: "POST",
          headers: { ...jsonHeaders, "content-length": String(5 * 1024 * 1024) },
        });
        tooLarge.on("error", () => {}); // the server may close before all of it is sent
        tooLarge.write("{");
        assert.equal((await answerOf(tooLarge)).status, 413);
        tooLarge.destroy();
        assert.equal((await answerOf(rawCall(server.url, "forged", { host: "evil.example" }))).status, 403);
      }
    } finally {
      await client.close();
    }
    await assertFullCapacity(server, tools, maxInFlight);
  });
}

/** A client that hangs up, through the SDK, mid-call or mid-body, gives its place back. */
function itGivesThePlaceBackOnHangUp(bounded: Bounded): void {
  const { maxInFlight } = bounded;
  it("gives the place back when the client hangs up mid-call or mid-body, however often", async () => {
    const { server, tools } = bounded;
    // Through the SDK: an aborted 2026-07-28 call closes its request, and the tool sees the abort.
    const client = await connect(server.url);
    try {
      for (let round = 0; round < 5; round += 1) {
        const before = tools.started.length;
        const controllers = Array.from({ length: maxInFlight }, () => new AbortController());
        const calls = controllers.map((controller, index) =>
          callSlow(client, `aborted-${round}-${index}`, controller.signal).then(
            () => "answered",
            () => "rejected",
          ),
        );
        await waitFor("the calls running", () => tools.started.length - before === maxInFlight);
        for (const controller of controllers) controller.abort();
        assert.deepEqual(await Promise.all(calls), Array(maxInFlight).fill("rejected"));
        // The client gives up at once; the server learns of it as the connection closes.
        await waitFor("the tools told", () =>
          controllers.every((_, index) => tools.aborted.includes(`aborted-${round}-${index}`)),
        );
      }
    } finally {
      await client.close();
    }
    // Raw sockets destroyed while the tool runs.
    for (let round = 0; round < 5; round += 1) {
      const before = tools.started.length;
      const requests = Array.from({ length: maxInFlight }, (_, index) =>
        rawCall(server.url, `hung-up-${round}-${index}`),
      );
      await waitFor("the raw calls running", () => tools.started.length - before === maxInFlight);
      for (const request of requests) request.destroy();
      await waitFor("the tools told", () =>
        requests.every((_, index) => tools.aborted.includes(`hung-up-${round}-${index}`)),
      );
    }
    const probe = async () => {
      const request = httpRequest(server.url, { method: "POST", headers: jsonHeaders });
      request.end("{not json");
      return (await answerOf(request)).status;
    };
    // Bodies that never finish hold their places (they are being read), and give them back on hang-up.
    for (let round = 0; round < 5; round += 1) {
      const partial = Array.from({ length: maxInFlight }, () => {
        const request = httpRequest(server.url, {
          method: "POST",
          headers: { ...jsonHeaders, "content-length": "1000" },
        });
        request.on("error", () => {});
        request.write('{"jsonrpc":"2.0",');
        return request;
      });
      // Admitted on their headers: a probe that is not JSON is answered 400 when it gets a place.
      await waitFor("the unfinished bodies to hold every place", async () => (await probe()) === 429);
      for (const request of partial) request.destroy();
      await waitFor("a place back after the hang-up", async () => (await probe()) === 400);
    }
    await assertFullCapacity(server, tools, maxInFlight);
  });
}

/** A flood of raw calls runs the tool `maxInFlight` times at once, no more. */
function itHoldsTheBoundUnderAFlood(bounded: Bounded): void {
  const { maxInFlight } = bounded;
  it("runs the tool at most maxInFlight times at once under a flood; every other call is refused", async () => {
    const { server, tools } = bounded;
    const before = tools.started.length;
    const statuses: number[] = [];
    const flood = Array.from({ length: 400 }, (_, index) =>
      answerOf(rawCall(server.url, `flood-${index}`)).then((answer) => {
        statuses.push(answer.status);
        return answer;
      }),
    );
    // Every request past the bound is answered at once, while the held ones still run.
    await waitFor("the refusals", () => statuses.length === 400 - maxInFlight);
    assert.ok(statuses.every((status) => status === 429));
    assert.equal(tools.started.length - before, maxInFlight);
    tools.openGate();
    const answers = await Promise.all(flood);
    assert.equal(answers.filter((answer) => answer.status === 200).length, maxInFlight);
    assert.equal(tools.started.length - before, maxInFlight, "no refused call ran");
    await assertFullCapacity(server, tools, maxInFlight);
  });
}

describe("serveMcpHttp bounds its requests in flight", () => {
  const bounded = { maxInFlight: 4 } as Bounded;
  before(async () => {
    bounded.tools = gatedTools();
    bounded.server = await serveMcpHttp(bounded.tools.toolset, {
      maxInFlight: bounded.maxInFlight,
      onError: () => {},
    });
  });
  after(() => bounded.server.close());

  for (const revision of revisions) itRefusesPastTheBound(bounded, revision);
  itGivesThePlaceBackOnFailure(bounded);
  itGivesThePlaceBackOnHangUp(bounded);
  itHoldsTheBoundUnderAFlood(bounded);
});

describe("serveMcpHttp's default bound", () => {
  it("serves 64 requests at once and refuses the 65th", async () => {
    const tools = gatedTools();
    const server = await serveMcpHttp(tools.toolset);
    try {
      const held = Array.from({ length: 64 }, (_, index) =>
        answerOf(rawCall(server.url, `default-${index}`)),
      );
      await waitFor("64 calls running", () => tools.started.length === 64);
      const refused = await answerOf(rawCall(server.url, "the-65th"));
      assert.equal(refused.status, 429);
      assert.match(JSON.parse(refused.text).error.message, /serving 64 requests already/);
      tools.openGate();
      const answers = await Promise.all(held);
      assert.ok(answers.every((answer) => answer.status === 200));
    } finally {
      await server.close();
    }
  });

  it("refuses a maxInFlight that is not a whole number of at least 1", async () => {
    for (const maxInFlight of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await assert.rejects(serveMcpHttp(gatedTools().toolset, { maxInFlight }), {
        code: "invalid_max_in_flight",
      });
    }
  });
});
