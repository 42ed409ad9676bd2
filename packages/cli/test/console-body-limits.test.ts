/**
 * The console reads a bounded body on every route (ADR 0271), over real loopback HTTP: sign-in 16 KiB
 * (before the code or token in it is checked), the page's tool call 4 MiB (as `/mcp` reads a call),
 * durable's API 1 MiB (in-process demo runs and another durable server's alike), any other page route
 * 16 KiB. A body past its route's bound is answered 413 with the bound in words and in `data` while
 * the client is still sending it, chunked or declared; the next request on the route is served. A
 * foreign Origin and a missing credential are refused before a byte of the body is read.
 */
import assert from "node:assert/strict";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { createToolSet, defineTool, silentLogger } from "@tackle/core";
import { createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { underLoadMs } from "@tackle/test-support";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";

const token = "console-body-limits-token-0123456789";
const KiB = 1024;
const MiB = 1024 * KiB;

const size = defineTool({
  name: "size",
  description: "How long the pad it was given is",
  input: z.object({ pad: z.string() }),
  execute: ({ pad }) => ({ length: pad.length }),
});

const remoteGraph = createGraph<{ pad?: string; done?: boolean }>("remote-noop").node("end", async () => ({
  done: true,
}));

let demo: RunningConsole;
let remote: RunningConsole;
let durable: DurableServer;
let runner: Runner;
let demoCookie = "";
let remoteCookie = "";

const origin = (running: RunningConsole) => `http://127.0.0.1:${running.port}`;

before(async () => {
  const source = () =>
    createEmbeddedToolSource([
      { module: "probe", toolset: createToolSet([size]), errors: [], close: () => {} },
    ]);
  runner = createRunner({ store: createMemoryStore(), graphs: [remoteGraph], logger: silentLogger });
  durable = await serveDurable({ runner });
  demo = await startConsole({
    source: source(),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
  remote = await startConsole({
    source: source(),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
    durableUrl: durable.url,
  });
  demoCookie = await signIn(demo);
  remoteCookie = await signIn(remote);
});
after(async () => {
  await demo?.close();
  await remote?.close();
  await durable?.close();
  await runner?.close();
});

/** Signs in with the console token (accepted again and again, unlike the one-time code): the cookie. */
async function signIn(running: RunningConsole): Promise<string> {
  const answer = await fetch(`${origin(running)}/api/session`, {
    method: "POST",
    headers: { origin: origin(running), "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  assert.equal(answer.status, 200, await answer.text());
  return (answer.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

interface Sent {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** Bytes of the body written when the answer's head arrived. */
  readonly sentAtAnswer: number;
  /** Bytes the whole body would have had. */
  readonly total: number;
}

interface BodyPlan {
  /** The body's opening (JSON up to a string being padded) and closing. */
  readonly head: string;
  readonly tail: string;
  /** Bytes of the whole body: `head`, padding, `tail`. */
  readonly total: number;
  /** Padding written per tick, every `everyMs`. */
  readonly chunk: number;
  readonly everyMs: number;
  /** A `Content-Length` to declare (the truth or not); none: sent chunked. */
  readonly declare?: number;
}

/**
 * POSTs a body a little at a time on a connection of its own, and stops writing once the answer's head
 * arrives (or the whole body is out): the answer, and how much had been sent by then.
 */
function trickle(url: string, headers: Record<string, string>, plan: BodyPlan): Promise<Sent> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const ms = underLoadMs(20_000);
    const outgoing = httpRequest(url, {
      method: "POST",
      agent: false,
      headers: {
        ...headers,
        ...(plan.declare === undefined ? {} : { "content-length": String(plan.declare) }),
      },
    });
    const timer = setTimeout(() => outgoing.destroy(new Error(`no answer within ${ms} ms`)), ms);
    outgoing.on("error", (error) => {
      if (!answered) {
        clearTimeout(timer);
        reject(error);
      }
    });
    outgoing.on("response", (response) => {
      answered = true;
      const sentAtAnswer = sent;
      let text = "";
      response.on("data", (chunk) => (text += String(chunk)));
      response.on("error", () => {});
      response.on("end", () => {
        clearTimeout(timer);
        outgoing.destroy();
        const { statusCode = 0, headers } = response;
        resolve({ status: statusCode, headers, text, sentAtAnswer, total: plan.total });
      });
    });
    const write = (text: string) => {
      sent += Buffer.byteLength(text);
      outgoing.write(text);
    };
    write(plan.head);
    const padding = "x".repeat(plan.chunk);
    const pad = plan.total - Buffer.byteLength(plan.head) - Buffer.byteLength(plan.tail);
    let padded = 0;
    const tick = () => {
      if (answered || outgoing.destroyed) return;
      if (padded < pad) {
        const part = padding.slice(0, Math.min(plan.chunk, pad - padded));
        padded += part.length;
        write(part);
        setTimeout(tick, plan.everyMs).unref();
        return;
      }
      write(plan.tail);
      // A declared length the body does not reach is left hanging: only the answer ends it.
      if (plan.declare === undefined || plan.declare === sent) outgoing.end();
    };
    setTimeout(tick, plan.everyMs).unref();
  });
}

/** A body eight times its route's bound, sent chunked: a sixteenth of the bound every 10 ms. */
const chunked = (head: string, tail: string, bound: number): BodyPlan => ({
  head,
  tail,
  total: 8 * bound,
  chunk: bound / 16,
  everyMs: 10,
});

/** The 413 the page's API answers: its bound in words and in `data`, early. */
function assertTooLarge(sent: Sent, bound: number, words: RegExp): void {
  assert.equal(sent.status, 413, sent.text);
  const body = JSON.parse(sent.text) as { error: { code: string; message: string; data: unknown } };
  assert.equal(body.error.code, "payload_too_large");
  assert.deepEqual(body.error.data, { maxBytes: bound });
  assert.match(body.error.message, words);
  assert.ok(
    sent.sentAtAnswer < sent.total / 2,
    `answered after ${sent.sentAtAnswer} of ${sent.total} bytes: the body was read on past its bound`,
  );
}

interface Route {
  readonly label: string;
  readonly running: () => RunningConsole;
  readonly path: string;
  readonly bound: number;
  readonly words: RegExp;
  readonly headers: () => Record<string, string>;
  readonly head: string;
  readonly tail: string;
  /** A legal request on the route, and that it was served. */
  legal(): Promise<void>;
}

const json = (running: RunningConsole, cookie?: string) => ({
  origin: origin(running),
  "content-type": "application/json",
  ...(cookie === undefined ? {} : { cookie }),
});

const durableWords = /over 1 MiB \(1048576 bytes\), the most the console reads for \/api\/durable/;

const routes: readonly Route[] = [
  {
    label: "sign-in",
    running: () => demo,
    path: "/api/session",
    bound: 16 * KiB,
    words: /over 16 KiB \(16384 bytes\), the most the console reads for POST \/api\/session/,
    headers: () => json(demo),
    // The right token, inside a body too large: the bound comes before the token is checked.
    head: `{"token":"${token}","pad":"`,
    tail: `"}`,
    async legal() {
      assert.match(await signIn(demo), /^tackle_console=/);
    },
  },
  {
    label: "the page's tool call",
    running: () => demo,
    path: "/api/call/stream",
    bound: 4 * MiB,
    words: /over 4 MiB \(4194304 bytes\), the most the console reads for POST \/api\/call\/stream/,
    headers: () => ({ ...json(demo, demoCookie), accept: "text/event-stream" }),
    head: `{"tool":"probe.size","args":{"pad":"`,
    tail: `"}}`,
    async legal() {
      // Just under the bound, as /mcp reads a call of this size.
      const pad = 4 * MiB - 64;
      const answer = await fetch(`${origin(demo)}/api/call/stream`, {
        method: "POST",
        headers: { ...json(demo, demoCookie), accept: "text/event-stream" },
        body: JSON.stringify({ tool: "probe.size", args: { pad: "y".repeat(pad) } }),
      });
      assert.equal(answer.status, 200);
      const events = await answer.text();
      const answered = events.slice(events.indexOf("event: answer"));
      assert.match(answered, new RegExp(`^event: answer\\ndata: .*length\\\\?":${pad}\\b`));
    },
  },
  {
    label: "starting a demo run",
    running: () => demo,
    path: "/api/runs",
    bound: 16 * KiB,
    words: /over 16 KiB \(16384 bytes\), the most the console reads for POST \/api\/runs/,
    headers: () => json(demo, demoCookie),
    head: `{"orderId":"ORD-1","pad":"`,
    tail: `"}`,
    async legal() {
      const answer = await fetch(`${origin(demo)}/api/runs`, {
        method: "POST",
        headers: json(demo, demoCookie),
        body: JSON.stringify({ orderId: "ORD-2" }),
      });
      assert.equal(answer.status, 201, await answer.text());
    },
  },
  {
    label: "durable's API (the demo's runs)",
    running: () => demo,
    path: "/api/durable/runs",
    bound: MiB,
    words: durableWords,
    headers: () => json(demo, demoCookie),
    head: `{"graph":"demo-refund","input":{"orderId":"ORD-3","pad":"`,
    tail: `"}}`,
    async legal() {
      const answer = await fetch(`${origin(demo)}/api/durable/runs`, {
        method: "POST",
        headers: json(demo, demoCookie),
        body: JSON.stringify({ graph: "demo-refund", input: { orderId: "ORD-4" } }),
      });
      assert.equal(answer.status, 201, await answer.text());
    },
  },
  {
    label: "durable's API (another durable server's runs)",
    running: () => remote,
    path: "/api/durable/runs",
    bound: MiB,
    words: durableWords,
    headers: () => json(remote, remoteCookie),
    head: `{"graph":"remote-noop","input":{"pad":"`,
    tail: `"}}`,
    async legal() {
      const answer = await fetch(`${origin(remote)}/api/durable/runs`, {
        method: "POST",
        headers: json(remote, remoteCookie),
        body: JSON.stringify({ graph: "remote-noop", input: { pad: "z" } }),
      });
      assert.equal(answer.status, 201, await answer.text());
    },
  },
];

for (const route of routes) {
  describe(`${route.label}: POST ${route.path} reads at most ${route.bound} bytes`, () => {
    test("a chunked body past the bound is answered 413 while it is still being sent; the next request is served", async () => {
      const running = route.running();
      const sent = await trickle(
        `${origin(running)}${route.path}`,
        route.headers(),
        chunked(route.head, route.tail, route.bound),
      );
      assertTooLarge(sent, route.bound, route.words);
      assert.equal(sent.headers["set-cookie"], undefined, "nobody was signed in");
      await route.legal();
    });

    test("a declared length past the bound (2 GiB, of which 1 KiB is sent) is answered 413 at once", async () => {
      const running = route.running();
      const sent = await trickle(`${origin(running)}${route.path}`, route.headers(), {
        head: route.head,
        tail: route.tail,
        total: 2 * 1024 * MiB,
        chunk: KiB,
        everyMs: 60_000,
        declare: 2 * 1024 * MiB,
      });
      assertTooLarge(sent, route.bound, route.words);
      await route.legal();
    });
  });
}

test("sign-in past its bound: the connection is closed after the 413, so a client sending on at full speed is not read on", async () => {
  const self = origin(demo);
  const cap = 64 * MiB;
  const outcome = await new Promise<{ status: number; atAnswer: number; sent: number; closed: boolean }>(
    (resolve, reject) => {
      let sent = 0;
      let status = 0;
      let atAnswer = -1;
      const outgoing = httpRequest(`${self}/api/session`, {
        method: "POST",
        agent: false,
        headers: { origin: self, "content-type": "application/json" },
      });
      const ms = underLoadMs(20_000);
      const timer = setTimeout(() => {
        outgoing.destroy();
        reject(new Error(`neither answered nor closed within ${ms} ms (${sent} bytes sent)`));
      }, ms);
      const end = (closed: boolean) => {
        clearTimeout(timer);
        resolve({ status, atAnswer, sent, closed });
      };
      outgoing.on("response", (response) => {
        status = response.statusCode ?? 0;
        atAnswer = sent;
        response.resume();
      });
      outgoing.on("error", () => end(true));
      const chunk = Buffer.alloc(MiB, "x");
      outgoing.write(`{"token":"${token}","pad":"`);
      const pump = () => {
        while (sent < cap) {
          sent += chunk.length;
          if (!outgoing.write(chunk)) return void outgoing.once("drain", pump);
        }
        outgoing.end(`"}`, () => setTimeout(() => end(false), 500));
      };
      pump();
    },
  );
  // The 413 is read unless the close overtook it on the client's side (its write failing first).
  assert.ok([413, 0].includes(outcome.status), `answered ${outcome.status}`);
  assert.equal(outcome.closed, true, `the whole ${cap} bytes were taken (${JSON.stringify(outcome)})`);
  assert.ok(outcome.sent < cap / 2, `${outcome.sent} bytes were taken before the connection closed`);
  await signIn(demo);
});

test("/mcp reads at most 4 MiB, the bound the page's tool call shares: past it 413 in JSON-RPC, early", async () => {
  const sent = await trickle(
    demo.url,
    {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
      authorization: `Bearer ${token}`,
    },
    chunked(
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"probe.size","arguments":{"pad":"`,
      `"}}}`,
      4 * MiB,
    ),
  );
  assert.equal(sent.status, 413, sent.text);
  assert.deepEqual(JSON.parse(sent.text), {
    jsonrpc: "2.0",
    error: { code: -32000, message: "Payload Too Large: Request body must not exceed 4194304 bytes" },
    id: null,
  });
  assert.ok(sent.sentAtAnswer < sent.total / 2, `answered after ${sent.sentAtAnswer} of ${sent.total}`);
});

describe("refused before the body is read", () => {
  const slowHuge = (head: string): BodyPlan => ({
    head,
    tail: "}",
    total: 2 * 1024 * MiB,
    chunk: KiB,
    everyMs: 60_000,
  });

  test("a foreign Origin or a rebound Host, with a huge body, on sign-in, the page's API and /mcp: 403 at once", async () => {
    const self = origin(demo);
    for (const path of ["/api/session", "/api/call/stream", "/api/runs", "/mcp"]) {
      for (const headers of [
        { origin: "http://evil.example" },
        { host: `evil.example:${demo.port}` },
        { origin: `http://127.0.0.1:${demo.port + 1}` },
      ]) {
        // Another loopback port's page is this host's own: /mcp (bearer token, no cookie) lets it by.
        if (path === "/mcp" && headers.origin?.startsWith("http://127.0.0.1:")) continue;
        const sent = await trickle(
          `${self}${path}`,
          {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            cookie: demoCookie,
            authorization: `Bearer ${token}`,
            ...headers,
          },
          slowHuge(`{"token":"${token}","pad":"`),
        );
        const where = `${path} with ${JSON.stringify(headers)}`;
        assert.equal(sent.status, 403, `${where}: ${sent.text}`);
        assert.ok(sent.sentAtAnswer < 4 * KiB, `${where}: answered after ${sent.sentAtAnswer} bytes`);
      }
    }
  });

  test("no credential, with a huge body, on the page's API and /mcp: 401 at once", async () => {
    const self = origin(demo);
    for (const path of ["/api/call/stream", "/api/runs", "/api/durable/runs", "/mcp"]) {
      const sent = await trickle(
        `${self}${path}`,
        {
          origin: self,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        slowHuge(`{"pad":"`),
      );
      assert.equal(sent.status, 401, `${path}: ${sent.text}`);
      assert.ok(sent.sentAtAnswer < 4 * KiB, `${path}: answered after ${sent.sentAtAnswer} bytes`);
    }
  });
});

test("a declared length shorter than what follows bounds the read: the rest is a malformed request, refused 400, the connection closed", async () => {
  const body = JSON.stringify({ token });
  const raw = [
    "POST /api/session HTTP/1.1",
    `Host: 127.0.0.1:${demo.port}`,
    `Origin: ${origin(demo)}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "",
    "",
  ].join("\r\n");
  const socket = connect(demo.port, "127.0.0.1");
  let received = "";
  const closed = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the connection stayed open")), underLoadMs(10_000));
    socket.on("data", (chunk) => {
      received += String(chunk);
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // The declared body (a legal sign-in), then 8 MiB it did not declare.
  socket.write(raw + body);
  socket.write("x".repeat(8 * MiB));
  await closed;
  // The declared body is answered (200) unless Node's parser met the rest first, in the same read: then
  // the connection is refused whole. Never is the rest read as the body (a 413, or a sign-in refused).
  const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1]);
  assert.ok(
    ["400", "200,400"].includes(statuses.join(",")),
    `answered ${statuses.join(", ")}: ${received.slice(0, 500)}`,
  );
  await signIn(demo);
});
