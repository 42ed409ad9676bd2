/**
 * What the memory middleware adds to a model call: `generateText` on the AI SDK's mock model, bare
 * and wrapped by `withMemory`, against the real memory service over loopback HTTP (SQLite, seeded).
 * Rows: a cache hit (same identity and query), a miss (a new query each call: one context-bundle
 * request), and a miss with the capture awaited (two event writes); then the real `openai` client
 * against a scripted OpenAI wire server on loopback, bare and wrapped (cache hit). Each wrapped row
 * is compared with its own bare row. Prints a markdown table.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/middleware.ts [--seconds=2]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { withMemory } from "@tackle/memory/ai-sdk";
import { createOpenAIMiddleware } from "@tackle/memory/openai";
import { serveMemory } from "@tackle/memory/server";
import { generateText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import OpenAI from "openai";
import { startOpenAIWireServer } from "../../packages/memory/test-middleware/support/start-openai-wire-server.ts";

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

// The OpenAI rows: the real openai client against a scripted OpenAI wire server on loopback.
const wire = await startOpenAIWireServer(() => "Noted.", { jitterMs: 0, record: false });
const openai = new OpenAI({ apiKey: "sk-bench", baseURL: wire.baseURL, maxRetries: 0 });
const rememberingOpenAI = createOpenAIMiddleware(openai, {
  ...memoryOptions,
  userId: "alice",
  sessionId: "bench",
  capture: false,
});
const chat = (client: OpenAI) =>
  client.chat.completions.create({
    model: "scripted",
    messages: [{ role: "user", content: "What do I like?" }],
  });

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
  { name: "openai chat.completions.create over loopback (no middleware)", body: () => chat(openai) },
  { name: "createOpenAIMiddleware, cache hit", body: () => chat(rememberingOpenAI) },
];

/** Warm every case, then measure them round-robin in short slices, so drift and noise hit all alike. */
async function measureAll(milliseconds: number) {
  const samples = cases.map(() => [] as number[]);
  for (const testCase of cases) for (let index = 0; index < 20; index++) await testCase.body();
  const rounds = 8;
  for (let round = 0; round < rounds; round++) {
    for (const [index, testCase] of cases.entries()) {
      const until = performance.now() + milliseconds / rounds;
      while (performance.now() < until) {
        const started = performance.now();
        await testCase.body();
        samples[index]!.push((performance.now() - started) * 1000);
        if (samples[index]!.length % 256 === 0) forgetCalls();
      }
    }
  }
  return cases.map((testCase, index) => {
    const sorted = samples[index]!.sort((left, right) => left - right);
    const mean = sorted.reduce((total, value) => total + value, 0) / sorted.length;
    const at = (fraction: number) =>
      sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!;
    return { name: testCase.name, calls: sorted.length, mean, p50: at(0.5), p99: at(0.99) };
  });
}

const rows = await measureAll(seconds * 1000);
const bareAiSdk = rows[0]!.p50;
const bareOpenAI = rows[4]!.p50;
const format = (value: number) => value.toFixed(0);
console.log(
  `\nmemory middleware, ${seconds} s per row, Node ${process.version}, 200 memories in SQLite over loopback HTTP\n`,
);
console.log("| call | calls | mean µs | p50 µs | p99 µs | added µs vs bare (p50) | × bare (p50) |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const [index, row] of rows.entries()) {
  const bare = index < 4 ? bareAiSdk : bareOpenAI;
  console.log(
    `| ${row.name} | ${row.calls} | ${format(row.mean)} | ${format(row.p50)} | ${format(row.p99)} | ${format(row.p50 - bare)} | ${(row.p50 / bare).toFixed(2)} |`,
  );
}
await wire.close();
await server.close();
rmSync(directory, { recursive: true, force: true });
