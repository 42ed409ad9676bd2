/**
 * Per-step cost of a journaled step against a plain call, on SQLite and PostgreSQL, side by side in the
 * same run with LangGraph JS (SQLite and PostgreSQL checkpointers, durability "sync") on the same N-step
 * graph; both PostgreSQL variants use the same server and database.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/durable/journal-bench.ts [steps] [rounds]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Annotation,
  END as LangGraphEnd,
  START as LangGraphStart,
  MemorySaver,
  StateGraph,
} from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createGraph, createMemoryStore, createRunner, type DurableStore } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase } from "@tackle/test-support";

/** better-sqlite3 13, untyped here: only what the bench touches. */
interface SqliteConnection {
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): void;
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new (path: string) => SqliteConnection;

const steps = Number(process.argv[2] ?? 100);
const rounds = Number(process.argv[3] ?? 5);
const directory = mkdtempSync(join(tmpdir(), "durable-bench-"));

/** The work every step does: trivial, so what is measured is the durability around it. */
function work(value: number): number {
  return value + 1;
}

type State = { n: number };

/** N chained nodes, each one journaled step: the same shape as the LangGraph graph below. */
function tackleNodeGraph() {
  const graph = createGraph<State>(`nodes-${steps}`);
  for (let index = 0; index < steps; index++) {
    graph.node(`n${index}`, async (state, ctx) => ({ n: await ctx.step("work", () => work(state.n)) }));
    if (index > 0) graph.edge(`n${index - 1}`, `n${index}`);
  }
  return graph;
}

/** One node, N journaled steps: the journal's own cost, without node bookkeeping. */
function tackleStepGraph() {
  return createGraph<State>(`steps-${steps}`).node("loop", async (state, ctx) => {
    let n = state.n;
    for (let index = 0; index < steps; index++) n = await ctx.step("work", () => work(n));
    return { n };
  });
}

function langGraph(checkpointer: SqliteSaver | MemorySaver | PostgresSaver) {
  const Schema = Annotation.Root({ n: Annotation<number> });
  // biome-ignore lint/suspicious/noExplicitAny: node names are built in a loop
  const builder: any = new StateGraph(Schema);
  for (let index = 0; index < steps; index++)
    builder.addNode(`n${index}`, (state: State) => ({ n: work(state.n) }));
  builder.addEdge(LangGraphStart, "n0");
  for (let index = 1; index < steps; index++) builder.addEdge(`n${index - 1}`, `n${index}`);
  builder.addEdge(`n${steps - 1}`, LangGraphEnd);
  return builder.compile({ checkpointer });
}

interface Variant {
  readonly name: string;
  run(round: number): Promise<void>;
}

function tackleVariant(
  name: string,
  store: DurableStore,
  graphKind: "nodes" | "steps",
  label: string,
): Variant {
  const graph = graphKind === "nodes" ? tackleNodeGraph() : tackleStepGraph();
  const runner = createRunner({ store });
  return {
    name,
    async run(round) {
      const result = await runner.start(graph, { n: 0 }, { threadId: `${label}-${round}` });
      if (result.state.n !== steps) throw new Error(`${label}: ended at ${result.state.n}`);
    },
  };
}

const synchronousName = (database: SqliteConnection) =>
  ["OFF", "NORMAL", "FULL", "EXTRA"][Number(database.pragma("synchronous", { simple: true }))] ?? "?";

const variants: Variant[] = [
  {
    name: "plain call (no durability)",
    async run() {
      let n = 0;
      for (let index = 0; index < steps; index++) n = await Promise.resolve(work(n));
      if (n !== steps) throw new Error("plain");
    },
  },
];
const memory = createMemoryStore();
variants.push(tackleVariant("Tackle ctx.step × N, in-memory store", memory, "steps", "memory-steps"));
variants.push(tackleVariant("Tackle N nodes × 1 step, in-memory store", memory, "nodes", "memory-nodes"));
const sqliteStores: DurableStore[] = [];
for (const synchronous of ["full", "normal"] as const) {
  const sqlite = createSqliteStore({ path: join(directory, `tackle-${synchronous}.sqlite`), synchronous });
  sqliteStores.push(sqlite);
  const label = `SQLite synchronous=${synchronous.toUpperCase()}`;
  variants.push(tackleVariant(`Tackle ctx.step × N, ${label}`, sqlite, "steps", `${synchronous}-steps`));
  variants.push(tackleVariant(`Tackle N nodes × 1 step, ${label}`, sqlite, "nodes", `${synchronous}-nodes`));
}
const database = await createTestDatabase("durable_bench");
const postgres = await createPostgresStore({ connectionString: database.url });
variants.push(tackleVariant("Tackle ctx.step × N, PostgreSQL", postgres, "steps", "pg-steps"));
variants.push(tackleVariant("Tackle N nodes × 1 step, PostgreSQL", postgres, "nodes", "pg-nodes"));

// better-sqlite3 13 (Node-API) handed to the saver: its own 12.x build aborts under Node 24 (see README).
const langGraphDatabase = new Database(join(directory, "langgraph.sqlite"));
const sqliteGraph = langGraph(new SqliteSaver(langGraphDatabase as never));
const langGraphSqliteName = () =>
  `LangGraph N nodes, SqliteSaver (WAL, synchronous=${synchronousName(langGraphDatabase)}), durability "sync"`;
variants.push({
  name: "LangGraph SQLite",
  async run(round) {
    const result = await sqliteGraph.invoke(
      { n: 0 },
      { configurable: { thread_id: `lg-${round}` }, durability: "sync", recursionLimit: steps + 10 },
    );
    if (result.n !== steps) throw new Error("langgraph");
  },
});
// LangGraph's PostgreSQL checkpointer on the same server and database as Tackle's store.
const postgresSaver = PostgresSaver.fromConnString(database.url);
await postgresSaver.setup();
const postgresGraph = langGraph(postgresSaver);
variants.push({
  name: 'LangGraph N nodes, PostgresSaver, durability "sync"',
  async run(round) {
    const result = await postgresGraph.invoke(
      { n: 0 },
      { configurable: { thread_id: `pg-${round}` }, durability: "sync", recursionLimit: steps + 10 },
    );
    if (result.n !== steps) throw new Error("langgraph postgres");
  },
});
const memoryGraph = langGraph(new MemorySaver());
variants.push({
  name: 'LangGraph N nodes, MemorySaver, durability "sync"',
  async run(round) {
    await memoryGraph.invoke(
      { n: 0 },
      { configurable: { thread_id: `mem-${round}` }, durability: "sync", recursionLimit: steps + 10 },
    );
  },
});

// Round-robin: every round runs every variant once, so a burst of load on the machine hits them alike.
const times = variants.map(() => [] as number[]);
for (const variant of variants) await variant.run(-1); // warm-up
for (let round = 0; round < rounds; round++) {
  for (const [index, variant] of variants.entries()) {
    const started = performance.now();
    await variant.run(round);
    times[index]?.push(performance.now() - started);
  }
}
const rows = variants.map((variant, index) => {
  const sorted = [...(times[index] ?? [])].sort((a, b) => a - b);
  const name = variant.name === "LangGraph SQLite" ? langGraphSqliteName() : variant.name;
  return { name, milliseconds: sorted[Math.floor(sorted.length / 2)] as number };
});
langGraphDatabase.close();
for (const store of sqliteStores) await store.close();
await postgres.close();
await postgresSaver.end();
await database.drop();
rmSync(directory, { recursive: true, force: true });

const plain = rows[0]?.milliseconds ?? 1;
const langGraphSqlite =
  rows.find((row) => row.name.startsWith("LangGraph N nodes, SqliteSaver"))?.milliseconds ?? 1;
console.log(`\nN = ${steps} steps, median of ${rounds} runs, Node ${process.version}\n`);
console.log("| variant | run (ms) | per step (µs) | × plain call | × LangGraph SQLite |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  const perStep = (row.milliseconds * 1000) / steps;
  console.log(
    `| ${row.name} | ${row.milliseconds.toFixed(1)} | ${perStep.toFixed(1)} | ${(row.milliseconds / plain).toFixed(0)} | ${(row.milliseconds / langGraphSqlite).toFixed(2)} |`,
  );
}
