/**
 * The console's MCP sessions as a property against an oracle (console-sessions-oracle.ts), with real
 * clients over loopback HTTP: random programs of MCP SDK clients opening 2025 sessions, calling
 * `demo.add` with random numbers (alone and several sessions at once), listing tools, deleting their
 * sessions and idling past expiry; raw requests (POST, GET, DELETE) that reuse a deleted, evicted or
 * expired session id, forge one, or send a live one with a wrong token; session-less 2026-07-28 calls;
 * bursts of slow calls past the token's in-flight bound. Whatever the program: every call answers
 * once with its own sum, never another client's; an id the console does not hold is answered 404
 * `Session not found`, a wrong token 401, never with a result; the console holds at most `max`
 * sessions and drops one only when deleted, least recently used at a full table, or idle past
 * `idleMs`; the tool never runs more than `maxInFlight` calls at once, a call past them is refused
 * 429 `overloaded` and its place comes back; once every client has left, the console holds no session,
 * no request and no stream. By default 250 steps (about 30 s on two busy cores); `TACKLE_PROPERTY_ROUNDS`
 * sets the number, `TACKLE_PROPERTY_SEED` repeats a run.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type ServerType, serve } from "@hono/node-server";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createToolSet, defineTool, silentLogger } from "@tackle/core";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import { z } from "zod";
import { type ConsoleApp, createConsoleApp } from "../src/console/create-console-app.ts";
import demoTools from "../src/modules/demo.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { createSessionOracle, type HeldSession, type SessionOracle } from "./console-sessions-oracle.ts";

const steps = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 250);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? Date.now() % 100_000);
const token = "console-sessions-property-token-0123";
const maxSessions = 4;
const idleMs = 1_500;
/** The console sweeps idle sessions every quarter of `idleMs` (at least 250 ms). */
const sweepMs = 375;
const maxInFlight = 3;

let running = 0;
let peak = 0;
/** `slow.add`: `demo.add` that takes `ms`, counting the calls running at once. */
const slowAdd = defineTool({
  name: "add",
  description: "Adds numbers, slowly",
  input: z.object({ numbers: z.array(z.number()), ms: z.number() }),
  execute: async ({ numbers, ms }) => {
    running += 1;
    peak = Math.max(peak, running);
    try {
      await sleep(ms);
      return { sum: numbers.reduce((total, value) => total + value, 0) };
    } finally {
      running -= 1;
    }
  },
});

let app: ConsoleApp;
let server: ServerType;
let url: string;
let modern: Client;

before(async () => {
  app = createConsoleApp({
    source: createEmbeddedToolSource([
      { module: "demo", toolset: createToolSet(demoTools), errors: [], close: () => {} },
      { module: "slow", toolset: createToolSet([slowAdd]), errors: [], close: () => {} },
    ]),
    token,
    logger: silentLogger,
    mcpSessions: { max: maxSessions, idleMs },
    maxInFlight,
  });
  server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 });
  await once(server, "listening");
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  modern = (await connect({ pin: "2026-07-28" })).client;
});
after(async () => {
  await modern?.close();
  await app?.close();
  await new Promise<void>((resolve) => {
    server?.close(() => resolve());
    if (server !== undefined && "closeAllConnections" in server) server.closeAllConnections();
  });
});

async function connect(mode: "legacy" | { pin: "2026-07-28" }, bearer = token) {
  const client = new Client(
    { name: "sessions-property", version: "0.1.0" },
    { versionNegotiation: { mode } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
  });
  await client.connect(transport);
  // A session the console closed ends the client's stream; its reconnection's 404 is expected.
  client.onerror = () => {};
  return { client, transport };
}

async function waitFor(what: string, condition: () => boolean, ms = underLoadMs(10_000)): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`waited ${ms} ms for ${what}`);
    await sleep(10);
  }
}

/** The HTTP status an SDK client's error carries, if it is one. */
function statusOf(error: unknown): number | undefined {
  return (error as { data?: { status?: number } }).data?.status;
}

type Random = () => number;
const pick = <T>(next: Random, items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
const numbersOf = (next: Random) =>
  Array.from({ length: 1 + Math.floor(next() * 4) }, () => Math.floor(next() * 2_000_000) - 1_000_000);
const sumOf = (numbers: readonly number[]) => numbers.reduce((total, value) => total + value, 0);

/** One program's state: the oracle, its random source, and what it counted. */
interface Run {
  readonly next: Random;
  readonly oracle: SessionOracle;
  readonly counts: Record<string, number>;
  step: string;
}

function count(run: Run, what: string): void {
  run.counts[what] = (run.counts[what] ?? 0) + 1;
}

/** A call's answer: its sum, or the refusal it got (checked here), or `not-found`. */
async function callAdd(
  run: Run,
  client: Client,
  tool: "demo.add" | "slow.add",
  ms = 0,
): Promise<"answered" | "refused" | "not-found"> {
  const numbers = numbersOf(run.next);
  try {
    const args = tool === "demo.add" ? { numbers } : { numbers, ms };
    const result = (await client.callTool(
      { name: tool, arguments: args },
      { timeout: underLoadMs(10_000) },
    )) as CallToolResult;
    assert.deepEqual(
      result.structuredContent,
      { sum: sumOf(numbers) },
      `${tool} answered another sum (${run.step})`,
    );
    return "answered";
  } catch (error) {
    const status = statusOf(error);
    if (status === 404) return "not-found";
    assert.equal(status, 429, `${tool} failed otherwise than refused: ${error} (${run.step})`);
    const text = (error as { data?: { text?: string } }).data?.text ?? "";
    assert.deepEqual(JSON.parse(text).error.data, {
      code: "overloaded",
      retryable: true,
      retryAfterSeconds: 1,
      maxInFlight,
    });
    return "refused";
  }
}

/** A session's call or listing through its SDK client, its outcome told to the oracle. */
async function useSession(run: Run, session: HeldSession, use: "call" | "list"): Promise<void> {
  const sentAt = Date.now();
  let outcome: "answered" | "refused" | "not-found";
  if (use === "call") outcome = await callAdd(run, session.client, "demo.add");
  else {
    try {
      const { tools } = await session.client.listTools();
      assert.ok(
        tools.some((tool) => tool.name === "demo.add"),
        `the session lists demo.add (${run.step})`,
      );
      outcome = "answered";
    } catch (error) {
      assert.equal(statusOf(error), 404, `listing failed: ${error} (${run.step})`);
      outcome = "not-found";
    }
  }
  assert.notEqual(outcome, "refused", `a lone call was refused (${run.step})`);
  if (outcome === "answered") run.oracle.touched(session, sentAt);
  else run.oracle.notFound(session, run.step);
}

/** Sessions used at once leave their order unknown: listed one by one, they get the oracle's. */
async function settleOrder(run: Run, sessions: readonly HeldSession[]): Promise<void> {
  for (const session of sessions)
    if (run.oracle.live.includes(session)) await useSession(run, session, "list");
}

async function openSession(run: Run): Promise<void> {
  const sentAt = Date.now();
  const { client, transport } = await connect("legacy");
  const id = transport.sessionId;
  assert.ok(id, `a 2025 client got a session (${run.step})`);
  run.oracle.opened({ id, client, transport, sentAt });
  // Its event stream opens on its own, touching the session: waited for before anything else runs.
  await waitFor(
    "every live session's stream open",
    () => app.bounds.held("token").stream === run.oracle.live.length,
  );
}

/** A raw request with a session id the console must not serve: 404 (401 for a wrong token), no result. */
async function raw(run: Run, id: string, bearer = token): Promise<void> {
  const method = pick(run.next, ["POST", "GET", "DELETE"] as const);
  const headers: Record<string, string> = {
    authorization: `Bearer ${bearer}`,
    "mcp-session-id": id,
    "mcp-protocol-version": "2025-06-18",
    accept: method === "GET" ? "text/event-stream" : "application/json, text/event-stream",
  };
  const numbers = numbersOf(run.next);
  const body =
    method === "POST"
      ? JSON.stringify({
          jsonrpc: "2.0",
          id: 7,
          method: "tools/call",
          params: { name: "demo.add", arguments: { numbers } },
        })
      : undefined;
  if (body !== undefined) headers["content-type"] = "application/json";
  const answer = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await answer.text();
  const expected = bearer === token ? 404 : 401;
  assert.equal(answer.status, expected, `${method} with ${id}: ${text} (${run.step})`);
  assert.doesNotMatch(text, /"result"|"sum"/, `no result for ${id} (${run.step})`);
  if (expected === 404) assert.match(text, /Session not found/);
}

/** Slow calls past the in-flight bound, from session-less and session clients at once. */
async function burst(run: Run): Promise<void> {
  const size = maxInFlight + 1 + Math.floor(run.next() * 4);
  const sessions = run.oracle.live.filter(() => run.next() < 0.5);
  const callers = Array.from({ length: size }, (_, index) => sessions[index % (sessions.length + 2)]);
  const ms = 100 + Math.floor(run.next() * 200);
  const outcomes = await Promise.all(
    callers.map(async (session) => {
      const sentAt = Date.now();
      const outcome = await callAdd(run, session?.client ?? modern, "slow.add", ms);
      if (session !== undefined && outcome === "answered") run.oracle.touched(session, sentAt);
      if (session !== undefined && outcome === "not-found") run.oracle.notFound(session, run.step);
      return outcome;
    }),
  );
  for (const outcome of outcomes) count(run, `burst ${outcome}`);
  assert.ok(peak <= maxInFlight, `${peak} calls ran at once, past ${maxInFlight} (${run.step})`);
  await settleOrder(run, sessions);
  // Every refused or answered call's place is back: the bound's worth of calls all run at once.
  await waitFor("every request place back", () => app.bounds.held("token").request === 0);
  const again = await Promise.all(
    Array.from({ length: maxInFlight }, () => callAdd(run, modern, "slow.add", 50)),
  );
  assert.deepEqual(again, Array(maxInFlight).fill("answered"), `places came back (${run.step})`);
}

/** A call that runs past the idle time: answered, its session kept (idle counts from the answer). */
async function longCall(run: Run, session: HeldSession): Promise<void> {
  const sentAt = Date.now();
  const outcome = await callAdd(run, session.client, "slow.add", idleMs + 2 * sweepMs);
  if (outcome === "not-found") return run.oracle.notFound(session, run.step);
  assert.equal(outcome, "answered", `a call past the idle time (${run.step})`);
  run.oracle.touched(session, sentAt);
  // Every other session idled meanwhile; this one must still be served.
  await useSession(run, session, "list");
  assert.ok(run.oracle.live.includes(session), `a session closed under its running call (${run.step})`);
}

async function stepOnce(run: Run): Promise<void> {
  const { next, oracle } = run;
  const roll = next();
  const live = oracle.live;
  if (live.length === 0 || roll < 0.16) {
    count(run, "open");
    return openSession(run);
  }
  if (roll < 0.36) {
    count(run, "call");
    return useSession(run, pick(next, live), "call");
  }
  if (roll < 0.44) {
    count(run, "list");
    return useSession(run, pick(next, live), "list");
  }
  if (roll < 0.52) {
    count(run, "calls at once");
    const sessions = live.filter(() => next() < 0.7).slice(0, maxInFlight);
    await Promise.all(sessions.map((session) => useSession(run, session, "call")));
    return settleOrder(run, sessions);
  }
  if (roll < 0.56) {
    if (next() < 0.5) return;
    count(run, "call past the idle time");
    return longCall(run, pick(next, live));
  }
  if (roll < 0.6) {
    count(run, "delete");
    const session = pick(next, live);
    await session.transport.terminateSession();
    oracle.ended(session, "deleted");
    return;
  }
  if (roll < 0.7) {
    const ended = [...oracle.gone.keys()];
    count(run, ended.length === 0 ? "forged" : "reused");
    return raw(run, ended.length === 0 ? randomUUID() : pick(next, ended));
  }
  if (roll < 0.74) {
    count(run, "forged");
    return raw(run, next() < 0.5 ? randomUUID() : `forged-${Math.floor(next() * 1e9)}`);
  }
  if (roll < 0.78) {
    count(run, "wrong token");
    return raw(run, pick(next, live).id, `${token}-not`);
  }
  if (roll < 0.9) {
    count(run, "session-less");
    assert.equal(await callAdd(run, modern, "demo.add"), "answered", `a session-less call (${run.step})`);
    return;
  }
  if (roll < 0.97) {
    count(run, "burst");
    return burst(run);
  }
  count(run, "idle");
  await sleep(idleMs + sweepMs);
  await waitFor("every idle session swept", () => app.mcpSessionCount === 0);
}

test("sessions never answer for one another, and the session and in-flight bounds hold under random lifecycles", async (t) => {
  const next = seededRandom(seed);
  const note = `TACKLE_PROPERTY_SEED=${seed}`;
  const oracle = createSessionOracle({
    max: maxSessions,
    idleMs,
    // Their clients stay open until the console is seen to have ended their streams itself.
    retire: (session) => leaving.push(session.client),
  });
  const leaving: Client[] = [];
  const run: Run = { next, oracle, counts: {}, step: "" };
  const started = Date.now();
  for (let index = 0; index < steps; index++) {
    run.step = `step ${index}, ${note}`;
    await stepOnce(run);
    oracle.sync(app.mcpSessionCount, run.step);
    await waitFor("no request place held, a stream for each live session", () => {
      const held = app.bounds.held("token");
      return held.request === 0 && held.reply === 0 && held.stream === oracle.live.length;
    });
    for (const client of leaving.splice(0)) await client.close();
  }
  // Every client leaves: half delete their sessions, the rest just go and their sessions expire.
  for (const session of [...oracle.live]) {
    if (next() < 0.5) {
      await session.transport.terminateSession();
      oracle.ended(session, "deleted");
    } else oracle.ended(session, "expired");
  }
  await waitFor("no session held", () => app.mcpSessionCount === 0, underLoadMs(idleMs * 4));
  await waitFor("no place held", () => {
    const held = app.bounds.held("token");
    return held.request === 0 && held.stream === 0 && held.reply === 0;
  });
  for (const client of leaving.splice(0)) await client.close();
  for (const id of oracle.gone.keys()) await raw({ ...run, step: `after the run, ${note}` }, id);
  assert.ok((run.counts.open ?? 0) > 0 && (run.counts["burst refused"] ?? 0) > 0, JSON.stringify(run.counts));
  t.diagnostic(
    `${steps} steps in ${Date.now() - started} ms, ${oracle.gone.size} sessions, peak in flight ${peak}; ${JSON.stringify(run.counts)}; ${note}`,
  );
});
