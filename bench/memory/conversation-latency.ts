/**
 * The cost of conversations: a tenant of 6,000 turns (ten conversations of 600 turns, built from
 * eval/dialogues.json's turns), then
 *   - search p50 on one conversation's scope (its questions), `service.search` in process, on SQLite
 *     and on PostgreSQL, beside wink-bm25-text-search and MiniSearch over the same 600 turns;
 *   - batch writes: turns per second through `addBatch` (episodes, 200 a batch);
 *   - import: one 600-turn conversation through the import job (OpenAI messages), wall time.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/conversation-latency.ts [--stores=sqlite,postgres] [--embedder=word-vectors]
 * `--scale=600:6000,6000:60000,20000:200000 [--users=1000x200]` runs conversation-scale.ts instead (scopes of
 * N turns in tenants of M; add `--expose-gc` before `--conditions` for its heap figures).
 * `--embedder=word-vectors`: the service embeds every turn and question with the local word-vector
 * embedder (`@tackle/memory/word-vectors`, at `wordVectorWeight`); its vectors load before the clock starts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryService, createSqliteStore, type MemoryService, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createWordVectorEmbedder, wordVectorWeight } from "@tackle/memory/word-vectors";
import { createTestDatabase } from "@tackle/test-support";
import { median, percentile, runScale } from "./conversation-scale.ts";
import { type Conversation, type EvalSet, loadSets, type Turn } from "./eval-sets.ts";
import { libraries } from "./library-baselines.ts";

const argument = (name: string) => process.argv.find((item) => item.startsWith(`--${name}=`))?.split("=")[1];
const stores = (argument("stores") ?? "sqlite,postgres").split(",");
const conversationTurns = 600;
const conversations = 10;
const batch = 200;
const embedder = argument("embedder");
if (embedder !== undefined && embedder !== "word-vectors")
  throw new Error(`--embedder=word-vectors, not ${embedder}`);
const wordVectors = embedder === undefined ? undefined : createWordVectorEmbedder();
// Loaded before any clock starts: the bench measures writes and searches, not the load.
await wordVectors?.doEmbed({ values: ["warm"] });
const vectors = wordVectors ? { embeddingModel: wordVectors, vectorWeight: wordVectorWeight } : {};
const withVectors = wordVectors ? " + word vectors" : "";

const [dialogues] = loadSets("dialogues") as [EvalSet];
/** Ten conversations of 600 turns: each its own turns, continued by the next conversation's. */
const tenant: { id: string; turns: (Turn & { at: string })[]; questions: Conversation["questions"] }[] = [];
for (let index = 0; index < conversations; index += 1) {
  const turns: (Turn & { at: string })[] = [];
  for (let offset = 0; turns.length < conversationTurns; offset += 1) {
    const source = dialogues.conversations[(index + offset) % dialogues.conversations.length]!;
    for (const session of source.sessions) {
      for (const [position, turn] of session.turns.entries()) {
        if (turns.length >= conversationTurns) break;
        const at = new Date(Date.parse(session.date) + offset * 400 * 86_400_000 + position * 60_000);
        turns.push({ ...turn, id: `${offset}:${turn.id}`, at: at.toISOString() });
      }
    }
  }
  tenant.push({ id: `c${index}`, turns, questions: dialogues.conversations[index]!.questions });
}

const cpuNow = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

interface Figures {
  store: string;
  buildSeconds: number;
  turnsPerSecond: number;
  searchP50: number;
  searchP95: number;
  /** CPU time of this process per search (the machine is shared: wall time also measures the others). */
  searchCpuP50: number;
  importSeconds: number;
  /** CPU time of this process for the import (the job runs in it; PostgreSQL's own work is not in it). */
  importCpuSeconds: number;
  /** The import job's result: events created, memories extracted. */
  importResult: string;
}

async function measure(
  label: string,
  open: () => Promise<{ store: MemoryStore; drop: () => Promise<void> }>,
) {
  const { store, drop } = await open();
  let now = new Date();
  const service: MemoryService = createMemoryService({ store, now: () => now, ...vectors });
  try {
    const started = performance.now();
    let written = 0;
    let writing = 0;
    for (const conversation of tenant) {
      for (let from = 0; from < conversation.turns.length; from += batch) {
        const slice = conversation.turns.slice(from, from + batch);
        now = new Date(slice[0]!.at);
        const write = performance.now();
        await service.addBatch("bench", {
          userId: conversation.id,
          memories: slice.map((turn) => ({
            kind: "episode" as const,
            content: `${turn.speaker}: ${turn.text}`,
            metadata: { speaker: turn.speaker },
          })),
        });
        writing += performance.now() - write;
        written += slice.length;
      }
    }
    const buildSeconds = (performance.now() - started) / 1000;
    now = new Date(Date.parse(tenant[0]!.turns.at(-1)!.at) + 86_400_000);
    const times: number[] = [];
    const cpuTimes: number[] = [];
    // Warm-up, then every question of every conversation, in its own scope.
    for (const question of tenant[0]!.questions.slice(0, 5)) {
      await service.search("bench", { userId: tenant[0]!.id, query: question.question, limit: 10 });
    }
    for (const conversation of tenant) {
      for (const question of conversation.questions) {
        const at = performance.now();
        const cpuAt = cpuNow();
        await service.search("bench", { userId: conversation.id, query: question.question, limit: 10 });
        times.push(performance.now() - at);
        cpuTimes.push(cpuNow() - cpuAt);
      }
    }
    const importer = tenant[0]!;
    let importResult = "";
    const importStarted = performance.now();
    const importCpuStarted = cpuNow();
    const { job } = await service.importConversations("bench", {
      userId: "importer",
      format: "openai",
      conversations: [
        {
          id: "six-hundred",
          messages: importer.turns.map((turn, index) => ({
            role: index % 2 === 0 ? "user" : "assistant",
            content: turn.text,
            name: turn.speaker,
            created_at: turn.at,
          })),
        },
      ],
    });
    for (const deadline = Date.now() + 600_000; ; ) {
      const { job: state } = await service.getJob("bench", job.id);
      if (state.status === "succeeded") {
        importResult = JSON.stringify(state.result);
        break;
      }
      if (state.status === "failed" || Date.now() > deadline) throw new Error(`import ${state.status}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const figures: Figures = {
      store: label,
      buildSeconds,
      turnsPerSecond: written / (writing / 1000),
      searchP50: median(times),
      searchP95: percentile(times, 0.95),
      searchCpuP50: median(cpuTimes),
      importSeconds: (performance.now() - importStarted) / 1000,
      importCpuSeconds: (cpuNow() - importCpuStarted) / 1000,
      importResult,
    };
    return figures;
  } finally {
    await service.close();
    await drop();
  }
}

const scale = argument("scale");
if (scale !== undefined) {
  await runScale({ stores, sizes: scale, users: argument("users"), vectors, label: withVectors });
} else await runDefault();

async function runDefault() {
  const rows: Figures[] = [];
  if (stores.includes("sqlite")) {
    const directory = mkdtempSync(join(tmpdir(), "tackle-conversation-latency-"));
    rows.push(
      await measure(`SQLite (a file, in process)${withVectors}`, async () => ({
        store: createSqliteStore({ path: join(directory, "memory.db") }),
        drop: async () => rmSync(directory, { recursive: true, force: true }),
      })),
    );
  }
  if (stores.includes("postgres")) {
    rows.push(
      await measure(`PostgreSQL (local server, in process)${withVectors}`, async () => {
        const database = await createTestDatabase("tackle_memory_conversation_latency");
        return {
          store: await createPostgresStore({ connectionString: database.url }),
          drop: () => database.drop(),
        };
      }),
    );
  }

  const librarySearch = libraries.map((library) => {
    const times: number[] = [];
    const cpuTimes: number[] = [];
    for (const conversation of tenant) {
      const asSet: EvalSet = { name: "tenant", heldOut: false, speakers: true, conversations: [] };
      const search = library.index(asSet, {
        id: conversation.id,
        split: "dev",
        sessions: [{ id: 1, date: conversation.turns[0]!.at, turns: conversation.turns }],
        questions: conversation.questions,
      });
      for (const question of conversation.questions) {
        const at = performance.now();
        const cpuAt = cpuNow();
        search(question.question, 10);
        times.push(performance.now() - at);
        cpuTimes.push(cpuNow() - cpuAt);
      }
    }
    return {
      label: library.label,
      p50: median(times),
      p95: percentile(times, 0.95),
      cpuP50: median(cpuTimes),
    };
  });

  console.log(
    `Node ${process.versions.node}; ${conversations} conversations × ${conversationTurns} turns in one tenant; ${tenant.reduce((sum, item) => sum + item.questions.length, 0)} questions, each in its conversation's scope (limit 10)\n`,
  );
  console.log(
    "| store | build s (6,000 turns) | batch writes turns/s | search p50 ms | search p95 ms | search CPU p50 ms (this process) | import of 600 turns s | import CPU s (this process) |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) {
    console.log(
      `| ${row.store} | ${row.buildSeconds.toFixed(1)} | ${row.turnsPerSecond.toFixed(0)} | ${row.searchP50.toFixed(2)} | ${row.searchP95.toFixed(2)} | ${row.searchCpuP50.toFixed(2)} | ${row.importSeconds.toFixed(2)} | ${row.importCpuSeconds.toFixed(2)} |`,
    );
  }
  for (const library of librarySearch) {
    console.log(
      `| ${library.label}, one conversation's index | | | ${library.p50.toFixed(2)} | ${library.p95.toFixed(2)} | ${library.cpuP50.toFixed(2)} | | |`,
    );
  }
  console.log("");
  for (const row of rows) console.log(`${row.store}: import job result ${row.importResult}`);
}
