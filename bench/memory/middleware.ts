/**
 * What the memory middleware adds to a model call: `generateText` on the AI SDK's mock model, bare
 * and wrapped by `withMemory`, against the real memory service over loopback HTTP (SQLite, seeded).
 * Rows: a cache hit (same identity and query), a miss (a new query each call: one context-bundle
 * request), and a miss with the capture awaited (two event writes). Prints a markdown table.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/middleware.ts [--seconds=2]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { withMemory } from "@tackle/memory/ai-sdk";
import { serveMemory } from "@tackle/memory/server";
import { generateText } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const seconds = Number(
  process.argv.find((argument) => argument.startsWith("--seconds="))?.split("=")[1] ?? 2,
);

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const model = new MockLanguageModelV4({
  doGenerate: async () => ({
    content: [{ type: "text", text: "Noted." }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  }),
});
// The mock keeps every call's options; a long run would measure that array growing.
const forgetCalls = () => {
  model.doGenerateCalls.length = 0;
};

const directory = mkdtempSync(join(tmpdir(), "tackle-bench-memory-"));
const server = await serveMemory({
  store: join(directory, "memory.db"),
  apiKeys: { "bench-key": "bench" },
  host: "127.0.0.1",
  port: 0,
});
const topics = [
  "tea",
  "coffee",
  "hiking",
  "cello",
  "Lisbon",
  "aisle seats",
  "peanuts",
  "Helix",
  "trains",
  "bread",
];
for (let index = 0; index < 200; index++) {
  await server.service.add("bench", {
    userId: "alice",
    content: `Alice fact ${index}: she likes ${topics[index % topics.length]} number ${index}`,
    dedupe: false,
  });
}

const memoryOptions = {
  apiUrl: server.url,
  apiKey: "bench-key",
  clientOptions: { allowPrivateNetwork: true },
  onError: (error: Error) => {
    throw error;
  },
};
const injectOnly = withMemory(model, { ...memoryOptions, capture: false });
const withCapture = withMemory(model, { ...memoryOptions, awaitCapture: true, cache: false });

let counter = 0;
const call = (wrapped: LanguageModelV4, prompt: string, sessionId = "bench") =>
  generateText({ model: wrapped, prompt, providerOptions: { memory: { userId: "alice", sessionId } } });

interface Case {
  readonly name: string;
  readonly body: () => Promise<unknown>;
}

const cases: Case[] = [
  { name: "bare model call (no middleware)", body: () => call(model, "What do I like?") },
  { name: "withMemory, cache hit", body: () => call(injectOnly, "What do I like?") },
  {
    name: "withMemory, cache miss (bundle fetched)",
    body: () => call(injectOnly, `What about ${topics[counter++ % 10]} ${counter}?`),
  },
  {
    name: "withMemory, miss + awaited capture",
    body: () => call(withCapture, `Tell me about ${topics[counter++ % 10]} ${counter}`, `s${counter}`),
  },
];

async function measure(body: () => Promise<unknown>, milliseconds: number) {
  for (let index = 0; index < 20; index++) await body(); // warm up
  const samples: number[] = [];
  const until = performance.now() + milliseconds;
  while (performance.now() < until) {
    const started = performance.now();
    await body();
    samples.push((performance.now() - started) * 1000);
    if (samples.length % 256 === 0) forgetCalls();
  }
  samples.sort((left, right) => left - right);
  const mean = samples.reduce((total, value) => total + value, 0) / samples.length;
  return {
    calls: samples.length,
    mean,
    p50: samples[Math.floor(samples.length / 2)]!,
    p99: samples[Math.floor(samples.length * 0.99)]!,
  };
}

const rows = [];
for (const testCase of cases)
  rows.push({ name: testCase.name, ...(await measure(testCase.body, seconds * 1000)) });
const bare = rows[0]!.mean;
const format = (value: number) => value.toFixed(0);
console.log(
  `\nmemory middleware, ${seconds} s per row, Node ${process.version}, 200 memories in SQLite over loopback HTTP\n`,
);
console.log("| call | calls | mean µs | p50 µs | p99 µs | added µs vs bare | × bare |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  console.log(
    `| ${row.name} | ${row.calls} | ${format(row.mean)} | ${format(row.p50)} | ${format(row.p99)} | ${format(row.mean - bare)} | ${(row.mean / bare).toFixed(2)} |`,
  );
}
await server.close();
rmSync(directory, { recursive: true, force: true });
