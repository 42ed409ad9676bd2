/**
 * The conversation an AG-UI client sends with a resume under a redaction policy (ADR 0128). A client
 * that restates an approval's edited arguments, or a tool's result, with real values in its `messages`
 * must not have them kept or shown: the stored messages carry each tool call the thread showed as the
 * thread showed it. Real HTTP against `serveDurable`, a SQLite file read row by row at the end.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";
import { createGraph, createRunner, type Frame, type Runner, runIntegratedTool } from "@tackle/durable";
import { AgUiTranslator, type DurableServer, serveDurable } from "@tackle/durable/http";
import { readEvents } from "./ag-ui-client.ts";
import { sseAt, type TempStore, tempSqliteStore } from "./helpers.ts";

const charged: unknown[] = [];
const cards = createGraph<{ reply?: unknown }>("cards")
  .node("look", async (_state, ctx) => {
    await runIntegratedTool(ctx, "lookup", { user: "u1" }, { redact: ["pin"] }, () => ({
      pin: "SECRET-pin-real",
      name: "Ann",
    }));
    return {};
  })
  .node("pay", async (_state, ctx) => {
    const reply = await runIntegratedTool(
      ctx,
      "charge",
      { amount: 70, card: "SECRET-card-model" },
      { approve: true, redact: ["card"] },
      (args) => {
        charged.push(args);
        return { ok: true };
      },
      { inputSchema: { type: "object" } },
    );
    return { reply };
  })
  .edge("look", "pay");

let temp: TempStore;
let runner: Runner;
let server: DurableServer;
before(async () => {
  temp = tempSqliteStore();
  runner = createRunner({ store: temp.store, graphs: [cards], pollIntervalMs: 20 });
  server = await serveDurable({ runner });
});
after(async () => {
  await server.close();
  await runner.close();
  await temp.cleanup();
});

const runInput = (threadId: string, runId: string, messages: unknown[], resume?: unknown[]) => ({
  method: "POST",
  headers: { "content-type": "application/json", accept: "text/event-stream" },
  body: JSON.stringify({
    threadId,
    runId,
    state: {},
    messages,
    tools: [],
    context: [],
    forwardedProps: {},
    ...(resume === undefined ? {} : { resume }),
  }),
});

/** The raw SSE text of `path`, read until `done` holds. */
const sse = (path: string, done: (text: string) => boolean) => sseAt(server.url, path, done);

/** Every row of every table of the SQLite file, as text. */
function rowsOf(path: string): Record<string, string> {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
      name: string;
    }[];
    return Object.fromEntries(
      tables.map(({ name }) => [name, JSON.stringify(db.prepare(`SELECT * FROM "${name}"`).all())]),
    );
  } finally {
    db.close();
  }
}

const noSecret = (text: string, what: string) => {
  const at = text.indexOf("SECRET");
  assert.equal(at, -1, `${what} shows a secret near ${text.slice(Math.max(0, at - 160), at + 40)}`);
};

/** What a client holds after the first run, with real values written into it. */
const clientMessages = (edited: { amount: number; card: string }) => [
  { id: "u1", role: "user", content: "pay my bill" },
  {
    id: "look:tool:0",
    role: "assistant",
    toolCalls: [
      { id: "look:tool:0", type: "function", function: { name: "lookup", arguments: '{"user":"u1"}' } },
    ],
  },
  {
    id: "look:tool:0:result",
    role: "tool",
    toolCallId: "look:tool:0",
    content: JSON.stringify({ pin: "SECRET-pin-client", name: "Ann" }),
  },
  {
    id: "pay:tool:0",
    role: "assistant",
    toolCalls: [
      {
        id: "pay:tool:0",
        type: "function",
        function: { name: "charge", arguments: JSON.stringify(edited) },
      },
    ],
  },
  // A result the thread never showed: the client's claim, not kept.
  { id: "pay:tool:0:result", role: "tool", toolCallId: "pay:tool:0", content: '"SECRET-made-up"' },
];

describe("AG-UI: a resume's client messages under redaction", () => {
  test("edited arguments and tool results a client restates with real values are neither stored nor shown", async () => {
    const threadId = "leak";
    const first = await readEvents(
      `${server.url}/ag-ui/cards`,
      runInput(threadId, "r1", [{ id: "u1", role: "user", content: "pay my bill" }]),
    );
    assert.equal(first.at(-1)?.event.type, "RUN_FINISHED");
    const paused = await runner.get(threadId);
    const interruptId = paused?.interrupts[0]?.id ?? "";
    const resumed = await readEvents(
      `${server.url}/ag-ui/cards`,
      runInput(threadId, "r2", clientMessages({ amount: 7, card: "SECRET-card-edited" }), [
        {
          interruptId,
          status: "resolved",
          payload: { approved: true, editedArgs: { amount: 7, card: "SECRET-card-edited" } },
        },
      ]),
    );
    assert.deepEqual(charged.at(-1), { amount: 7, card: "SECRET-card-edited" }, "the tool got the edit");
    noSecret(JSON.stringify(resumed), "the resume's own stream");
    const snapshot = resumed.find((entry) => entry.event.type === "MESSAGES_SNAPSHOT")?.event as unknown as {
      messages: Record<string, unknown>[];
    };
    assert.ok(snapshot !== undefined, "the edit is restated");
    // The client's conversation is kept; its tool content is what the thread showed.
    assert.deepEqual(
      snapshot.messages.map((message) => message.id),
      ["u1", "look:tool:0", "look:tool:0:result", "pay:tool:0"],
    );
    assert.equal(snapshot.messages[2]?.content, JSON.stringify({ pin: "[redacted]", name: "Ann" }));
    const [call] = (snapshot.messages[3]?.toolCalls ?? []) as { function: { arguments: string } }[];
    assert.equal(call?.function.arguments, JSON.stringify({ amount: 7, card: "[redacted]" }));

    // Later readers: another viewer of the thread, the frames stream, the run and its history.
    const ends = (text: string) => text.split('"type":"RUN_FINISHED"').length - 1 >= 2;
    noSecret(await sse(`/ag-ui/threads/${threadId}/events`, ends), "a later AG-UI viewer");
    const last = (await runner.frames(threadId)).at(-1)?.seq;
    noSecret(await sse(`/runs/${threadId}/frames`, (text) => text.includes(`id: ${last}\n`)), "the frames");
    noSecret(await (await fetch(`${server.url}/runs/${threadId}`)).text(), "GET /runs/:id");
    noSecret(await (await fetch(`${server.url}/runs/${threadId}/history`)).text(), "the history");

    // The file: runs and frames hold no secret; nothing holds what only the client's messages carried.
    const rows = rowsOf(temp.path);
    noSecret(rows.durable_runs ?? "", "durable_runs");
    noSecret(rows.durable_frames ?? "", "durable_frames");
    for (const [table, text] of Object.entries(rows)) {
      for (const secret of ["SECRET-pin-client", "SECRET-made-up"])
        assert.ok(!text.includes(secret), `${table} holds ${secret}`);
    }
  });

  test("an edit of a redacted value alone: nothing to restate, and nothing of it kept", async () => {
    const threadId = "leak-quiet";
    await readEvents(
      `${server.url}/ag-ui/cards`,
      runInput(threadId, "q1", [{ id: "u1", role: "user", content: "pay my bill" }]),
    );
    const interruptId = (await runner.get(threadId))?.interrupts[0]?.id ?? "";
    // The shown amount left as it was: only the redacted card changes.
    const messages = clientMessages({ amount: 70, card: "SECRET-card-quiet" });
    const resumed = await readEvents(
      `${server.url}/ag-ui/cards`,
      runInput(threadId, "q2", messages, [
        {
          interruptId,
          status: "resolved",
          payload: { approved: true, editedArgs: { amount: 70, card: "SECRET-card-quiet" } },
        },
      ]),
    );
    assert.deepEqual(charged.at(-1), { amount: 70, card: "SECRET-card-quiet" });
    noSecret(JSON.stringify(resumed), "the resume's own stream");
    const frames = await runner.frames(threadId);
    noSecret(JSON.stringify(frames), "the frames");
    noSecret(rowsOf(temp.path).durable_frames ?? "", "durable_frames");
  });

  test("messages kept unmasked before (an older row) are shown as the thread showed them", () => {
    const frame = (seq: number, type: string, data: unknown): Frame =>
      ({ seq, type, data, createdAt: new Date(0).toISOString() }) as unknown as Frame;
    const translator = new AgUiTranslator({ threadId: "old", runId: "run" });
    const frames = [
      frame(1, "run_started", { runId: "run", state: {} }),
      frame(2, "tool_call", { id: "look:tool:0", name: "lookup", status: "running", params: { user: "u1" } }),
      frame(3, "tool_call", {
        id: "look:tool:0",
        name: "lookup",
        status: "completed",
        params: { user: "u1" },
        result: { pin: "[redacted]" },
      }),
      frame(4, "tool_call", {
        id: "pay:tool:0",
        name: "charge",
        status: "awaiting_approval",
        params: { amount: 70, card: "[redacted]" },
      }),
      frame(5, "interrupt", { interrupts: [] }),
      frame(6, "run_resumed", {
        clientRunId: "c2",
        clientMessages: clientMessages({ amount: 7, card: "SECRET-card-old" }),
      }),
      frame(7, "tool_call", {
        id: "pay:tool:0",
        name: "charge",
        status: "running",
        params: { amount: 7, card: "[redacted]" },
      }),
    ];
    const events = frames.flatMap((item) => translator.translate(item));
    assert.ok(events.some((event) => event.type === "MESSAGES_SNAPSHOT"));
    noSecret(JSON.stringify(events), "the translation of an older row");
  });
});
