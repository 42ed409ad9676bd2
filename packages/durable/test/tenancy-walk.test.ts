/**
 * The attacker's walk over every route `createDurableApp` registers (so a new route without an entry
 * here fails): tenant B, knowing tenant A's thread id, run id and interrupt id, calls each route on
 * them. Nothing of A's may come back (its data, its ids beyond those B sent, its tenant's storage key),
 * B's answers are those of a thread that does not exist, and A's paused run is untouched afterwards.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { approve, createGraph, createRunner, type Runner, tool } from "@tackle/durable";
import {
  createDurableApp,
  createDurableClient,
  type DurableServer,
  serveDurable,
} from "@tackle/durable/http";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const secret = "A-SECRET-ORDER";
let refundsPaid = 0;
const graph = createGraph<{ id: string; reply?: string }>("refund").node("task", async (state, ctx) => {
  const result = await tool(ctx, "refund", { id: state.id }, async () => {
    const answer = await approve(ctx, { title: `Refund ${state.id}?`, toolCallId: "task:tool:0" });
    if (!answer.approved) return "kept";
    refundsPaid += 1;
    return "refunded";
  });
  return { reply: result };
});

const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
const authenticate = (request: Request) =>
  tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")];

let temp: TempStore;
let runner: Runner;
let server: DurableServer;
/** A's paused run, and a completed one (a prune by B must not take it). */
const a = { threadId: "t-a", runId: "", interruptId: "", doneThreadId: "t-a-done", frames: 0 };

const acme = () => createDurableClient({ baseUrl: server.url, headers: { authorization: "Bearer token-a" } });

before(async () => {
  temp = tempSqliteStore();
  runner = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 50 });
  server = await serveDurable({ runner, authenticate });
  const client = acme();
  const started = await client.start("refund", { id: secret }, { threadId: a.threadId });
  a.runId = started.runId;
  for await (const _ of client.frames(a.threadId)) a.frames += 1;
  const paused = await client.get(a.threadId);
  assert.equal(paused.status, "paused");
  a.interruptId = paused.interrupts[0]?.id ?? "";
  assert.notEqual(a.interruptId, "");
  await client.start("refund", { id: `${secret}-2` }, { threadId: a.doneThreadId });
  for await (const _ of client.frames(a.doneThreadId));
  const donePaused = await client.get(a.doneThreadId);
  await client.resume(a.doneThreadId, { [donePaused.interrupts[0]?.id ?? ""]: { approved: true } });
  for await (const _ of client.frames(a.doneThreadId));
  assert.equal((await client.get(a.doneThreadId)).status, "completed");
  assert.equal(refundsPaid, 1);
});
after(async () => {
  await server.close();
  await runner.close();
  await temp.cleanup();
});

interface Attempt {
  readonly body?: unknown;
  readonly query?: string;
  /** The status B must get; a number, or a check. */
  readonly status: number;
  /** Runs after B's request: what it may see, besides the common checks. */
  readonly check?: (answer: string) => void;
}

/** One entry per route the app registers; `last` ones create B's own thread of the same id. */
function attempts(): Record<string, { readonly last?: boolean; readonly tries: readonly Attempt[] }> {
  const approveA = { [a.interruptId]: { approved: true } };
  return {
    "POST /runs": {
      last: true,
      tries: [
        // The same thread id and A's own run id: B gets a run of its own, never A's answered back.
        {
          body: { graph: "refund", threadId: a.threadId, runId: a.runId, input: { id: "B-ORDER" } },
          status: 201,
        },
      ],
    },
    "GET /runs/:threadId": { tries: [{ status: 404 }] },
    "POST /runs/:threadId/resume": {
      tries: [
        { body: { answers: approveA }, status: 404 },
        { body: { answers: {} }, query: "?recover=true", status: 404 },
      ],
    },
    "GET /runs/:threadId/frames": {
      tries: [{ status: 404 }, { query: "?format=ag-ui", status: 404 }],
    },
    "POST /runs/:threadId/cancel": { tries: [{ body: { reason: "B says so" }, status: 404 }] },
    "GET /runs/:threadId/history": { tries: [{ status: 404 }, { query: `?runId=${a.runId}`, status: 404 }] },
    // Forking A's thread from its first checkpoint (seq 1), into a thread of B's own.
    "POST /runs/:threadId/fork": {
      tries: [
        { body: { seq: 1 }, status: 404 },
        { body: { seq: 1, threadId: "b-fork", input: { id: "B-ORDER" } }, status: 404 },
      ],
    },
    "GET /threads": {
      tries: [
        {
          status: 200,
          check: (answer) => assert.deepEqual(JSON.parse(answer), { threads: [] }),
        },
        { query: `?after=${encodeURIComponent("../acme/")}`, status: 200 },
      ],
    },
    "GET /threads/:threadId/runs": { tries: [{ status: 404 }] },
    "GET /threads/:threadId/runs/:runId/frames": { tries: [{ status: 404 }] },
    "DELETE /threads/:threadId": { tries: [{ status: 404 }] },
    "POST /threads/prune": {
      tries: [
        {
          body: { olderThanMs: 0 },
          status: 200,
          check: (answer) => assert.deepEqual(JSON.parse(answer), { pruned: [] }),
        },
      ],
    },
    "POST /ag-ui/:graph": {
      tries: [
        // Answering A's interrupt through AG-UI, by thread id and interrupt id.
        {
          body: agUiInput({
            resume: [{ interruptId: a.interruptId, status: "resolved", payload: { approved: true } }],
          }),
          status: 404,
        },
      ],
    },
    "GET /ag-ui/threads/:threadId/events": { tries: [{ status: 404 }] },
  };
}

function agUiInput(extra: Record<string, unknown>) {
  return {
    threadId: a.threadId,
    runId: "b-run-1",
    state: {},
    messages: [],
    tools: [],
    context: [],
    forwardedProps: {},
    ...extra,
  };
}

/** Every (method, path) the app answers, from the app itself. */
function appRoutes(): string[] {
  const app = createDurableApp({ runner, authenticate });
  return [
    ...new Set(
      app.routes.filter((route) => route.method !== "ALL").map((route) => `${route.method} ${route.path}`),
    ),
  ];
}

async function asB(
  method: string,
  path: string,
  attempt: Attempt,
): Promise<{ status: number; text: string }> {
  const response = await fetch(`${server.url}${path}${attempt.query ?? ""}`, {
    method,
    headers: { authorization: "Bearer token-b", "content-type": "application/json" },
    ...(attempt.body === undefined
      ? method === "POST"
        ? { body: "{}" }
        : {}
      : { body: JSON.stringify(attempt.body) }),
    signal: AbortSignal.timeout(10_000),
  });
  // An SSE answer (B's own stream) is read until it ends or for a moment: enough to see what it carries.
  if ((response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    let text = "";
    const reader = response.body!.getReader();
    const until = Date.now() + 2_000;
    while (Date.now() < until) {
      const chunk = await Promise.race([
        reader.read(),
        new Promise<undefined>((resolve) => setTimeout(resolve, 500)),
      ]);
      if (chunk === undefined) continue;
      if (chunk.done) break;
      text += Buffer.from(chunk.value).toString("utf8");
    }
    await reader.cancel().catch(() => {});
    return { status: response.status, text };
  }
  return { status: response.status, text: await response.text() };
}

test("tenant B on tenant A's thread, run and interrupt ids, over every route: nothing of A's, A untouched", async () => {
  const table = attempts();
  const routes = appRoutes();
  assert.deepEqual(
    routes.filter((route) => !(route in table)),
    [],
    "every route of the app has an attacker's entry here",
  );
  const ordered = [...routes].sort(
    (x, y) => Number(table[x]?.last === true) - Number(table[y]?.last === true),
  );
  let calls = 0;
  for (const route of ordered) {
    const [method, pattern] = route.split(" ") as [string, string];
    const path = pattern
      .replace(":threadId", a.threadId)
      .replace(":runId", a.runId)
      .replace(":graph", "refund");
    for (const attempt of table[route]!.tries) {
      const { status, text } = await asB(method, path, attempt);
      calls += 1;
      const where = `${route}${attempt.query ?? ""} by B`;
      assert.equal(status, attempt.status, `${where}: ${text}`);
      const sent = JSON.stringify(attempt.body ?? "") + path;
      assert.ok(!text.includes(secret), `${where} answered A's data: ${text}`);
      for (const id of [a.runId, a.interruptId]) {
        if (!sent.includes(id)) assert.ok(!text.includes(id), `${where} answered A's id ${id}: ${text}`);
      }
      // Storage keys are `<tenant>/<thread>`: neither tenant's prefix is ever shown.
      assert.ok(!/\b(acme|globex)\//.test(text), `${where} showed a storage key: ${text}`);
      attempt.check?.(text);
    }
  }
  assert.ok(calls >= routes.length);
  // A's runs are as they were: paused on the same interrupt, the same frames, the done one kept.
  await runner.idle();
  const client = acme();
  const mine = await client.get(a.threadId);
  assert.equal(mine.status, "paused");
  assert.equal(mine.runId, a.runId);
  assert.deepEqual(
    mine.interrupts.map((interrupt) => interrupt.id),
    [a.interruptId],
  );
  assert.equal(mine.state.id, secret);
  let frames = 0;
  for await (const _ of client.frames(a.threadId)) frames += 1;
  assert.equal(frames, a.frames);
  assert.equal((await client.get(a.doneThreadId)).status, "completed");
  assert.equal(refundsPaid, 1, "no refund was paid by B's approvals");
  // And A sees nothing of B's run of the same thread id.
  const threads = (await (
    await fetch(`${server.url}/threads`, { headers: { authorization: "Bearer token-a" } })
  ).json()) as {
    threads: { threadId: string; runId: string }[];
  };
  assert.deepEqual(
    threads.threads.map((thread) => [
      thread.threadId,
      thread.runId === a.runId || thread.threadId === a.doneThreadId,
    ]),
    [
      [a.threadId, true],
      [a.doneThreadId, true],
    ],
  );
});
