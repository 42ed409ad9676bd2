/**
 * The HTTP rig of `redaction.property.test.ts`: a runner and `serveDurable` on one SQLite file, reopened
 * as a restarted or a taken-over process would, and the requests the property sends through it.
 */
import assert from "node:assert/strict";
import { createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { sseAt, type TempStore, tempSqliteStore } from "./helpers.ts";
import { assertNoMarker, type RedactionCase } from "./redaction-cases.ts";
import { answerOf, dieInTool, graph } from "./redaction-harness.ts";

type OpenInterrupt = { id: string; request: unknown };
type ServedRun = { status: string; runId: string; interrupts: OpenInterrupt[] };

export type HttpRig = ReturnType<typeof createHttpRig>;

export function createHttpRig() {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  const open = async (fresh: boolean, leaseMs?: number) => {
    const store = fresh ? temp.store : temp.reopen();
    runner = createRunner({
      store,
      graphs: [graph],
      pollIntervalMs: 20,
      ...(leaseMs === undefined ? {} : { leaseMs }),
    });
    server = await serveDurable({ runner });
  };
  const getJson = (path: string) => getJsonAt(server.url, path);
  const post = (path: string, body: unknown) => postAt(server.url, path, body);
  return {
    get temp() {
      return temp;
    },
    get runner() {
      return runner;
    },
    /** A fresh file's runner and server. */
    async start() {
      temp = tempSqliteStore();
      await open(true);
    },
    /** The runner restarted on the same file. */
    async restart() {
      await server.close();
      await runner.close();
      await open(false);
    },
    async stop() {
      await server.close();
      await runner.close();
      await temp.cleanup();
    },
    getJson,
    post,
    /** Polls the run until it leaves `running`. */
    async settled(threadId: string): Promise<ServedRun> {
      for (;;) {
        const run = JSON.parse(await getJson(`/runs/${threadId}`)) as ServedRun;
        if (run.status !== "running") return run;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    /** The raw SSE text of a stream, read until `done` says the last wanted event came. */
    sse: (path: string, done: (text: string) => boolean) => sseAt(server.url, path, done),
    /**
     * (e) The answer posted, the process dies inside the approved tool's call: what it left is read
     * while the call hangs; a new runner and app on the same file take the run over (`?recover=true`,
     * leaseMs 0: the old driver is known dead) and run the call again.
     */
    async answerAndDie(c: RedactionCase, threadId: string, answers: Record<string, unknown>) {
      const hung = dieInTool(c.seed);
      await post(`/runs/${threadId}/resume`, { answers });
      await hung;
      assertNoMarker(await getJson(`/runs/${threadId}`), "GET /runs/:id (tool in flight)", c);
      assertNoMarker(await runner.frames(threadId), "the frames (tool in flight)", c);
      await server.close();
      // Its process is gone: no more sweeps or expiry loads (its close waits for the hung call forever).
      runner.close().catch(() => {});
      await open(false, 0);
      await post(`/runs/${threadId}/resume?recover=true`, {});
    },
    /**
     * (f) An edited answer sent as an AG-UI resume, the client's conversation restating the call with
     * the real edited arguments and a made-up result holding the real input (ADR 0128): its stream
     * shows none.
     */
    async agUiResume(c: RedactionCase, threadId: string, open: OpenInterrupt) {
      const response = await fetch(`${server.url}/ag-ui/redaction`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(agUiResumeInput(c, threadId, open)),
      });
      const text = await response.text();
      assert.equal(response.status, 200, text);
      assertNoMarker(text, "the AG-UI resume's stream", c);
    },
  };
}

async function getJsonAt(base: string, path: string): Promise<string> {
  const response = await fetch(`${base}${path}`);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return text;
}

async function postAt(base: string, path: string, body: unknown): Promise<void> {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.status < 300, text);
}

/** The AG-UI `RunAgentInput` of an edited resume whose messages carry the real values. */
function agUiResumeInput(c: RedactionCase, threadId: string, open: OpenInterrupt) {
  const toolCallId = String((open.request as { toolCallId?: unknown }).toolCallId);
  const args = JSON.stringify(c.edit);
  const messages = [
    { id: "u", role: "user", content: "act" },
    {
      id: toolCallId,
      role: "assistant",
      toolCalls: [{ id: toolCallId, type: "function", function: { name: "act", arguments: args } }],
    },
    { id: `${toolCallId}:result`, role: "tool", toolCallId, content: JSON.stringify(c.input) },
  ];
  const resume = [{ interruptId: open.id, status: "resolved", payload: answerOf(c) }];
  return {
    threadId,
    runId: `ag${c.seed}`,
    state: {},
    messages,
    tools: [],
    context: [],
    forwardedProps: {},
    resume,
  };
}
