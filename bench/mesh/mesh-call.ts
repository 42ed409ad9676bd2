/**
 * A mesh tool call against the raw transports it rides on, in the same run:
 * - over NATS: `client.call("bench.echo")` through the node runtime vs a raw NATS request/reply echo;
 * - over stdio: the mesh's child call (`loadModules` + `toolset.call`) vs the MCP SDK's own client.
 * Latency p50/p99 at concurrency 1, throughput (and latency) at concurrency 64.
 *
 * Run: node_modules/.bin/node --conditions=@tackle/source bench/mesh/mesh-call.ts
 */
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { connect } from "@nats-io/transport-node";
import { createMeshClient, loadModules, startNodeRuntime } from "@tackle/mesh";
import { startNatsServer } from "@tackle/test-support";

const sequentialCalls = Number(process.env.BENCH_SEQUENTIAL ?? 2000);
const concurrentCalls = Number(process.env.BENCH_CONCURRENT ?? 10000);
const concurrency = 64;
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

interface Measured {
  readonly p50: number;
  readonly p99: number;
  readonly perSecond: number;
}

async function measure(total: number, workers: number, once: () => Promise<void>): Promise<Measured> {
  for (let index = 0; index < Math.min(200, total); index++) await once(); // warm up
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < total) {
        next += 1;
        const begun = performance.now();
        await once();
        latencies.push(performance.now() - begun);
      }
    }),
  );
  const elapsed = performance.now() - started;
  latencies.sort((left, right) => left - right);
  const at = (quantile: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * quantile))] ?? 0;
  return { p50: at(0.5), p99: at(0.99), perSecond: (total / elapsed) * 1000 };
}

const rounds = Number(process.env.BENCH_ROUNDS ?? 5);

/**
 * Subject and baselines take turns, round after round (subject, each baseline, subject, …); each
 * figure is the median over the rounds.
 */
async function compare(
  total: number,
  workers: number,
  subject: () => Promise<void>,
  ...baselines: (() => Promise<void>)[]
) {
  const subjects: Measured[] = [];
  const measured: Measured[][] = baselines.map(() => []);
  for (let round = 0; round < rounds; round++) {
    subjects.push(await measure(total, workers, subject));
    for (const [index, baseline] of baselines.entries())
      measured[index]?.push(await measure(total, workers, baseline));
  }
  return { subject: median(subjects), baselines: measured.map(median) };
}

function median(runs: readonly Measured[]): Measured {
  const middle = (values: number[]) =>
    values.sort((left, right) => left - right)[Math.floor(values.length / 2)] ?? 0;
  return {
    p50: middle(runs.map((run) => run.p50)),
    p99: middle(runs.map((run) => run.p99)),
    perSecond: middle(runs.map((run) => run.perSecond)),
  };
}

const rows: string[] = [];
function row(label: string, workers: number, subject: Measured, baseline: Measured): void {
  const ms = (value: number) => value.toFixed(3);
  rows.push(
    `| ${label} | ${workers} | ${ms(subject.p50)} | ${ms(baseline.p50)} | ${(subject.p50 / baseline.p50).toFixed(2)}× | ${ms(subject.p99)} | ${ms(baseline.p99)} | ${(subject.p99 / baseline.p99).toFixed(2)}× | ${Math.round(subject.perSecond)} | ${Math.round(baseline.perSecond)} | ${(subject.perSecond / baseline.perSecond).toFixed(2)}× |`,
  );
}

function unwrap(result: { ok: boolean }): void {
  if (!result.ok) throw new Error(`bench call failed: ${JSON.stringify(result)}`);
}

// --- over NATS ---
const nats = await startNatsServer();
const runtime = await startNodeRuntime({
  config: {
    node: "bench",
    brokerUrl: nats.url,
    modules: [{ module: "bench", path: here("echo-bundle.ts") }],
    consoleListen: { host: "127.0.0.1", port: 0 },
  },
});
const client = await createMeshClient({ servers: nats.url });
/** The same client without its node watch (which asks the nodes which calls they hold): its cost. */
const unwatched = await createMeshClient({ servers: nats.url, nodeWatch: false });
/**
 * The raw echo twice: with nats.js's defaults, and like-for-like with the mesh's connections, which set
 * `noAsyncTraces` (no stack traces captured per request).
 */
const rawPairs = await Promise.all(
  [
    { subject: "raw.echo", options: {} },
    { subject: "raw.echo-like", options: { noAsyncTraces: true } },
  ].map(async ({ subject, options }) => {
    const server = await connect({ servers: nats.url, ...options });
    server.subscribe(subject, {
      callback: (error, message) => {
        if (error === null) message.respond(JSON.stringify(message.json()));
      },
    });
    await server.flush();
    return { subject, server, client: await connect({ servers: nats.url, ...options }) };
  }),
);
const payload = { text: "hello mesh" };
const meshCall = async () => unwrap(await client.call("bench.echo", payload));
const unwatchedCall = async () => unwrap(await unwatched.call("bench.echo", payload));
const [plain, like] = rawPairs.map(({ subject, client: raw }) => async () => {
  (await raw.request(subject, JSON.stringify(payload), { timeout: 5000 })).json();
});
if (plain === undefined || like === undefined) throw new Error("no raw baseline");
for (const workers of [1, concurrency]) {
  const total = workers === 1 ? sequentialCalls : concurrentCalls;
  const { subject, baselines } = await compare(total, workers, meshCall, like, plain, unwatchedCall);
  const [likeRow, plainRow, unwatchedRow] = baselines;
  if (likeRow === undefined || plainRow === undefined || unwatchedRow === undefined)
    throw new Error("a baseline did not run");
  row("mesh call vs raw NATS request/reply, noAsyncTraces (as the mesh)", workers, subject, likeRow);
  row("mesh call vs raw NATS request/reply, nats.js defaults", workers, subject, plainRow);
  row("mesh call vs the same client with its node watch off", workers, subject, unwatchedRow);
}
await client.close();
await unwatched.close();
for (const { server, client: raw } of rawPairs) {
  await raw.close();
  await server.close();
}
await runtime.close();
await nats.close();

// --- over stdio (BENCH_STDIO=0 leaves it out) ---
if (process.env.BENCH_STDIO !== "0") await stdioRows();
async function stdioRows(): Promise<void> {
  const [child] = await loadModules([{ module: "bench", path: here("echo-server.mjs") }], {
    child: { maxInFlight: 64 },
  });
  if (child === undefined || child.errors.length > 0)
    throw new Error(`the stdio child did not load: ${JSON.stringify(child?.errors)}`);
  const sdk = new Client({ name: "bench", version: "1.0.0" });
  await sdk.connect(new StdioClientTransport({ command: here("echo-server.mjs") }));
  await sdk.listTools(); // as the mesh does once per child: the SDK's client caches what it lists
  const childCall = async () => unwrap(await child.toolset.call("echo", payload));
  const sdkCall = async () => {
    await sdk.callTool({ name: "echo", arguments: payload });
  };
  for (const workers of [1, concurrency]) {
    const total = workers === 1 ? Math.min(sequentialCalls, 1000) : Math.min(concurrentCalls, 5000);
    const { subject, baselines } = await compare(total, workers, childCall, sdkCall);
    const [baseline] = baselines;
    if (baseline === undefined) throw new Error("the baseline did not run");
    row("mesh stdio child vs raw MCP SDK stdio", workers, subject, baseline);
  }
  await sdk.close();
  await child.close();
}

console.log(
  `Node ${process.version}; over NATS ${sequentialCalls} sequential / ${concurrentCalls} concurrent calls, over stdio at most 1000 / 5000; median of ${rounds} interleaved rounds\n`,
);
console.log(
  "| path (subject vs baseline) | concurrency | p50 ms | baseline p50 ms | ratio | p99 ms | baseline p99 ms | ratio | calls/s | baseline calls/s | ratio |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const line of rows) console.log(line);
