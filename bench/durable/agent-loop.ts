/**
 * A user's agent, not a chain of no-ops: a model that calls a search tool K−1 times (each answer
 * ~8 KB of text) and then a publish tool a person must approve. Each variant runs it to the approval,
 * then a fresh runner (a new store connection, as a restarted process would open) resumes it with the
 * approval to the model's last answer. Side by side, in the same run: the AI SDK loop without
 * durability (the plain baseline), Tackle (`durableModel` + `withDurableTools`, one node) on SQLite and
 * PostgreSQL, and LangGraph's prebuilt ReAct agent (`createReactAgent`, the tool calling `interrupt()`)
 * under its SQLite and PostgreSQL checkpointers at durability "sync". The model is scripted on both
 * sides and decides from the conversation, as a model would (no hosted LLM here).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/durable/agent-loop.ts [calls,…] [rounds]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { tool as langChainTool } from "@langchain/core/tools";
import { Command, interrupt } from "@langchain/langgraph";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createGraph, createRunner, type DurableStore, type RunSnapshot } from "@tackle/durable";
import { durableModel, withDurableTools } from "@tackle/durable/ai-sdk";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase } from "@tackle/test-support";
import { tool as aiTool, generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

const sizes = (process.argv[2] ?? "25,100,200").split(",").map(Number);
const rounds = Number(process.argv[3] ?? 3);
/** What one search answers: ~8 KB of text (about 2,000 tokens). */
const page = "lorem ipsum dolor sit amet ".repeat(300);
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** The model's next move, from the tool answers it has read: search, then publish, then done. */
function nextMove(answered: number, calls: number) {
  const n = answered + 1;
  if (n > calls) return { text: "Done." };
  return {
    text: `Looking up part ${n}.`,
    id: `c${n}`,
    name: n === calls ? "publish" : "search",
    q: `part ${n}`,
  };
}

function scriptedModel(calls: number) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const move = nextMove(prompt.filter((message) => message.role === "tool").length, calls);
      return {
        content: [
          { type: "text" as const, text: move.text },
          ...(move.name === undefined
            ? []
            : [
                {
                  type: "tool-call" as const,
                  toolCallId: move.id,
                  toolName: move.name,
                  input: JSON.stringify({ q: move.q }),
                },
              ]),
        ],
        finishReason:
          move.name === undefined
            ? { unified: "stop" as const, raw: "stop" }
            : { unified: "tool-calls" as const, raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}

const aiTools = {
  search: aiTool({
    description: "Searches.",
    inputSchema: z.object({ q: z.string() }),
    execute: async ({ q }) => ({ q, page }),
  }),
  publish: aiTool({
    description: "Publishes.",
    inputSchema: z.object({ q: z.string() }),
    execute: async ({ q }) => ({ published: q }),
  }),
};

interface Measured {
  readonly pauseMs: number;
  readonly resumeMs: number;
  readonly storedBytes?: number;
}

async function plainLoop(calls: number): Promise<Measured> {
  const started = performance.now();
  const result = await generateText({
    model: scriptedModel(calls),
    tools: aiTools,
    stopWhen: stepCountIs(calls + 2),
    prompt: "go",
  });
  if (result.text !== "Done.") throw new Error(`plain: ${result.text}`);
  return { pauseMs: performance.now() - started, resumeMs: 0 };
}

function tackleAgent(calls: number) {
  return createGraph<{ prompt: string; reply?: string }>(`agent-${calls}`).node(
    "agent",
    async (state, ctx) => {
      const result = await generateText({
        model: durableModel(ctx, scriptedModel(calls)),
        tools: withDurableTools(ctx, aiTools, { publish: { approve: true } }),
        stopWhen: stepCountIs(calls + 2),
        abortSignal: ctx.signal,
        prompt: state.prompt,
      });
      return { reply: result.text };
    },
  );
}

async function tackleLoop(
  calls: number,
  open: () => Promise<DurableStore>,
  threadId: string,
): Promise<Measured> {
  const graph = tackleAgent(calls);
  const firstStore = await open();
  const first = createRunner({ store: firstStore, graphs: [graph] });
  let started = performance.now();
  const paused: RunSnapshot = await first.start(graph, { prompt: "go" }, { threadId });
  const pauseMs = performance.now() - started;
  await first.close();
  await firstStore.close();
  const [approval] = paused.interrupts ?? [];
  if (paused.status !== "paused" || approval === undefined) throw new Error(`tackle: ${paused.status}`);
  const secondStore = await open();
  const second = createRunner({ store: secondStore, graphs: [graph] });
  started = performance.now();
  const done = await second.resume(threadId, { [approval.id]: { approved: true } });
  const resumeMs = performance.now() - started;
  await second.close();
  await secondStore.close();
  if ((done.state as { reply?: string }).reply !== "Done.") throw new Error("tackle: not done");
  return { pauseMs, resumeMs };
}

class ScriptedChat extends BaseChatModel {
  readonly calls: number;
  constructor(calls: number) {
    super({});
    this.calls = calls;
  }
  _llmType() {
    return "scripted";
  }
  override bindTools() {
    return this as never;
  }
  async _generate(messages: BaseMessage[]) {
    const move = nextMove(messages.filter((message) => message.getType() === "tool").length, this.calls);
    const message = new AIMessage({
      content: move.text,
      tool_calls: move.name === undefined ? [] : [{ id: move.id, name: move.name, args: { q: move.q } }],
    });
    return { generations: [{ text: move.text, message }] };
  }
}

const langChainTools = [
  langChainTool(async ({ q }: { q: string }) => JSON.stringify({ q, page }), {
    name: "search",
    description: "Searches.",
    schema: z.object({ q: z.string() }),
  }),
  langChainTool(
    async ({ q }: { q: string }) => {
      const answer = interrupt({ approve: q }) as { approved: boolean };
      return JSON.stringify({ published: q, approved: answer.approved });
    },
    { name: "publish", description: "Publishes.", schema: z.object({ q: z.string() }) },
  ),
];

type Saver = SqliteSaver | PostgresSaver;

async function langGraphLoop(calls: number, open: () => Promise<Saver>, threadId: string): Promise<Measured> {
  const agent = (saver: Saver) =>
    createReactAgent({ llm: new ScriptedChat(calls), tools: langChainTools, checkpointSaver: saver });
  const config = {
    configurable: { thread_id: threadId },
    recursionLimit: calls * 2 + 10,
    durability: "sync" as const,
  };
  const firstSaver = await open();
  let started = performance.now();
  await agent(firstSaver).invoke({ messages: [{ role: "user", content: "go" }] }, config);
  const pauseMs = performance.now() - started;
  await closeSaver(firstSaver);
  const secondSaver = await open();
  started = performance.now();
  const done = await agent(secondSaver).invoke(new Command({ resume: { approved: true } }), config);
  const resumeMs = performance.now() - started;
  await closeSaver(secondSaver);
  if (String(done.messages.at(-1)?.content) !== "Done.") throw new Error("langgraph: not done");
  return { pauseMs, resumeMs };
}

async function closeSaver(saver: Saver) {
  if (saver instanceof PostgresSaver) await saver.end();
  else (saver as unknown as { db: { close(): void } }).db.close();
}

/** A SQLite file's size once its write-ahead log is folded in. */
function sqliteBytes(path: string): number {
  const database = new DatabaseSync(path);
  database.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const { size } = database
    .prepare("SELECT page_count * page_size AS size FROM pragma_page_count, pragma_page_size")
    .get() as { size: number };
  database.close();
  return size;
}

/** better-sqlite3 13 for LangGraph's saver (its own 12.x build aborts under Node 24; bench/durable/README.md). */
const Database = createRequire(import.meta.url)("better-sqlite3") as new (path: string) => unknown;
const directory = mkdtempSync(join(tmpdir(), "agent-loop-"));
const database = await createTestDatabase("durable_agent_bench");
const tacklePath = join(directory, "tackle.sqlite");
const langGraphPath = join(directory, "langgraph.sqlite");
const setup = PostgresSaver.fromConnString(database.url);
await setup.setup();
await setup.end();

const variants: { name: string; run(calls: number, thread: string): Promise<Measured> }[] = [
  { name: "AI SDK loop, no durability (baseline)", run: (calls) => plainLoop(calls) },
  {
    name: "Tackle, SQLite (synchronous=FULL)",
    run: async (calls, thread) => ({
      ...(await tackleLoop(calls, async () => createSqliteStore({ path: tacklePath }), thread)),
      storedBytes: sqliteBytes(tacklePath),
    }),
  },
  {
    name: "Tackle, PostgreSQL",
    run: (calls, thread) =>
      tackleLoop(calls, () => createPostgresStore({ connectionString: database.url }), thread),
  },
  {
    name: 'LangGraph ReAct agent, SqliteSaver, "sync"',
    run: async (calls, thread) => ({
      ...(await langGraphLoop(
        calls,
        async () => new SqliteSaver(new Database(langGraphPath) as never),
        thread,
      )),
      storedBytes: sqliteBytes(langGraphPath),
    }),
  },
  {
    name: 'LangGraph ReAct agent, PostgresSaver, "sync"',
    run: (calls, thread) =>
      langGraphLoop(calls, async () => PostgresSaver.fromConnString(database.url), thread),
  },
];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
console.log(
  `\nAgent of K tool calls (~8 KB answers), approval on the last; median of ${rounds} rounds, Node ${process.version}\n`,
);
console.log(
  "| K | variant | to the approval (ms) | × baseline | resume to the end (ms) | file per run (MB) |",
);
console.log("| ---: | --- | ---: | ---: | ---: | ---: |");
for (const calls of sizes) {
  const results = variants.map(() => [] as Measured[]);
  // Round-robin, so a burst of load on the machine hits every variant alike.
  for (let round = 0; round < rounds; round++) {
    for (const [index, variant] of variants.entries()) {
      rmSync(tacklePath, { force: true });
      rmSync(langGraphPath, { force: true });
      results[index]!.push(await variant.run(calls, `k${calls}-r${round}`));
    }
  }
  const baseline = median(results[0]!.map((result) => result.pauseMs));
  for (const [index, variant] of variants.entries()) {
    const measured = results[index]!;
    const pause = median(measured.map((result) => result.pauseMs));
    const stored = measured[0]?.storedBytes;
    const resume = index === 0 ? "—" : median(measured.map((result) => result.resumeMs)).toFixed(0);
    console.log(
      `| ${calls} | ${variant.name} | ${pause.toFixed(0)} | ${(pause / baseline).toFixed(1)} | ${resume} | ${stored === undefined ? "—" : (stored / 1_048_576).toFixed(1)} |`,
    );
  }
}
await database.drop();
rmSync(directory, { recursive: true, force: true });
