/**
 * What the memory tools cost a model, in tokens (gpt-tokenizer, o200k — GPT-4o / GPT-5's encoding):
 * the 26 tool definitions (name, description, JSON Schema of the input), and a typical answer of
 * each read tool beside the HTTP API's whole-record answer to the same request (the raw baseline).
 * The service runs on loopback over a scratch SQLite file, with one user's 40 memories, a
 * conversation, a document, traces and jobs.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/tokens.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createToolSet } from "@tackle/core";
import { MemoryClient } from "@tackle/memory";
import { serveMemory } from "@tackle/memory/server";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { createMemoryTools } from "../../packages/memory/src/tools/create-memory-tools.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-tokens-"));
const server = await serveMemory({
  store: join(directory, "memory.db"),
  apiKeys: { key: "bench" },
  host: "127.0.0.1",
  port: 0,
});
const client = new MemoryClient({ baseUrl: server.url, apiKey: "key", allowPrivateNetwork: true });
const tools = createToolSet(createMemoryTools(client));
const identity = { identity: { userId: "ana" } };
const scope = { userId: "ana" };
const tokens = (value: unknown) => countTokens(JSON.stringify(value));

const facts = [
  "Ana is allergic to peanuts and carries an epinephrine pen",
  "Ana works as a pharmacist at Umbrella Labs in Denver",
  "Ana's sister Lena lives in Lisbon and teaches piano",
  "Ana prefers aisle seats on long flights",
  "Ana runs five kilometres before work on weekdays",
  "Ana adopted a beagle called Ziggy last spring",
  "Ana is learning Portuguese for a trip in May",
  "Ana likes jasmine green tea in the afternoon",
];
for (let round = 0; round < 5; round += 1) {
  for (const fact of facts) {
    await client.add({ ...scope, content: `${fact} (note ${round + 1})`, dedupe: false });
  }
}
for (let turn = 0; turn < 12; turn += 1) {
  await client.writeEvent({
    ...scope,
    sessionId: "s1",
    role: turn % 2 ? "assistant" : "user",
    content: turn % 2 ? "Noted, I will remember that for next time." : `I told you about ${facts[turn / 2]}.`,
  });
}
await client.ingestDocument({
  ...scope,
  title: "Allergy card",
  content: "Peanut allergy: carry an epinephrine pen at all times. ".repeat(20),
});
const found = await client.search({ ...scope, query: "peanut allergy", limit: 10 });
const memoryId = found.results[0]!.memory.id;
const imported = await client.importConversations({
  ...scope,
  format: "openai",
  conversations: [{ messages: [{ role: "user", content: "I moved to Lisbon last year" }] }],
});
await client.waitForJob(imported.job.id, { timeoutMs: 30_000 });

const definitions = tools.tools.map((tool) => ({
  name: tool.name,
  tokens: tokens({ name: tool.name, description: tool.description, parameters: tool.inputJsonSchema }),
}));
const total = definitions.reduce((sum, item) => sum + item.tokens, 0);

/** Each read tool's typical call, and the HTTP API request that answers the same question. */
const reads: [string, unknown, () => Promise<unknown>][] = [
  [
    "memory_search",
    { query: "peanut allergy", limit: 10 },
    () => client.search({ ...scope, query: "peanut allergy" }),
  ],
  [
    "memory_search_kb",
    { query: "epinephrine", limit: 5 },
    () => client.searchKnowledge({ ...scope, query: "epinephrine" }),
  ],
  [
    "memory_recall_conversation",
    { sessionId: "s1", limit: 20 },
    () => client.recallConversation({ ...scope, sessionId: "s1", limit: 20 }),
  ],
  ["memory_profile", {}, () => client.profile(scope)],
  [
    "memory_build_context_bundle",
    { query: "what should I cook for Ana" },
    () => client.contextBundle({ ...scope, query: "what should I cook for Ana" }),
  ],
  ["memory_state_unified", {}, () => client.unifiedState(scope)],
  ["memory_lifecycle_get", { id: memoryId }, () => client.getMemory(memoryId, { scope })],
  ["memory_lifecycle_history", { id: memoryId }, () => client.memoryHistory(memoryId, { scope })],
  ["memory_chain_trace", { id: memoryId }, () => client.chainTrace(memoryId, { scope })],
  [
    "memory_novelty_scan",
    { candidates: [facts[0]!] },
    () => client.noveltyScan({ ...scope, candidates: [facts[0]!] }),
  ],
  ["memory_admin_list_traces", { limit: 5 }, () => client.listTraces({ ...scope, limit: 5 })],
  ["memory_admin_get_trace", { id: found.traceId }, () => client.getTrace(found.traceId, { scope })],
  ["memory_list_jobs", { limit: 5 }, () => client.listJobs({ ...scope, limit: 5 })],
  ["memory_get_job", { id: imported.job.id }, () => client.getJob(imported.job.id, { scope })],
  ["memory_admin_access_summaries", { limit: 5 }, () => client.accessSummaries({ ...scope, limit: 5 })],
  ["memory_admin_access_trends", { days: 7 }, () => client.accessTrends({ ...scope, days: 7 })],
  ["memory_status", {}, () => client.status()],
];

console.log(`Node ${process.versions.node}; tokens counted with gpt-tokenizer (o200k_base)\n`);
console.log(`The 26 tool definitions: **${total} tokens** (name + description + input JSON Schema)\n`);
console.log("| tool | definition tokens |");
console.log("| --- | ---: |");
for (const item of definitions) console.log(`| ${item.name} | ${item.tokens} |`);
console.log(`| **total** | **${total}** |\n`);
console.log("A typical answer of each read tool, beside the HTTP API's answer to the same request:\n");
console.log("| tool | tool answer tokens | HTTP API answer tokens (raw) | ratio |");
console.log("| --- | ---: | ---: | ---: |");
for (const [name, args, raw] of reads) {
  const answer = await tools.invoke(name, args, identity);
  const answerTokens = tokens(answer);
  const rawTokens = tokens(await raw());
  console.log(`| ${name} | ${answerTokens} | ${rawTokens} | ${(answerTokens / rawTokens).toFixed(2)}× |`);
}
await server.close();
rmSync(directory, { recursive: true, force: true });
