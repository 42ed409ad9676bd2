/**
 * Completion is bounded as a person typing needs it: at most 100 values in one answer (with the
 * module's total and `hasMore`), and a module that takes longer than `completionTimeoutMs` answers
 * nothing (with `hasMore`) instead of holding the request. A module here is a real tool set in
 * process; the client is the SDK's, over the SDK's in-memory transport.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import { createMcpServer } from "./create-mcp-server.ts";
import { completionTimeoutMs } from "./module-contributions.ts";

const words = Array.from({ length: 500 }, (_, index) => `word-${String(index).padStart(3, "0")}`);
let slowCallsAborted = 0;

const seat = [
  defineTool({
    name: "mcp.prompts",
    description: "prompts",
    input: z.object({}),
    execute: () => ({ prompts: [{ name: "pick", arguments: [{ name: "word" }, { name: "slow" }] }] }),
  }),
  defineTool({
    name: "mcp.prompt",
    description: "prompt",
    input: z.object({ name: z.string() }).loose(),
    execute: () => ({ messages: [] }),
  }),
  defineTool({
    name: "mcp.complete",
    description: "completes",
    input: z.object({
      ref: z.object({}).loose(),
      argument: z.object({ name: z.string(), value: z.string() }),
    }),
    execute: async ({ argument }, context) => {
      if (argument.name === "slow") {
        // Waits far past the bound, unless the call is abandoned.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 30_000);
          context.signal.addEventListener("abort", () => {
            slowCallsAborted += 1;
            clearTimeout(timer);
            resolve();
          });
        });
        return { values: ["too late"] };
      }
      const values = words.filter((word) => word.startsWith(argument.value));
      return { values, total: values.length };
    },
  }),
];

let client: Client;

before(async () => {
  const source = createEmbeddedToolSource([
    { module: "words", toolset: createToolSet(seat), errors: [], close: () => {} },
  ]);
  client = new Client({ name: "completion-bounds", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createMcpServer(source).connect(serverSide);
  await client.connect(clientSide);
});

after(async () => {
  await client?.close();
});

test("at most 100 values, with the module's total and hasMore", async () => {
  const all = await client.complete({
    ref: { type: "ref/prompt", name: "words.pick" },
    argument: { name: "word", value: "word-" },
  });
  assert.equal(all.completion.values.length, 100);
  assert.equal(all.completion.values[0], "word-000");
  assert.equal(all.completion.total, 500);
  assert.equal(all.completion.hasMore, true);
  const few = await client.complete({
    ref: { type: "ref/prompt", name: "words.pick" },
    argument: { name: "word", value: "word-49" },
  });
  assert.deepEqual(
    few.completion.values,
    Array.from({ length: 10 }, (_, index) => `word-49${index}`),
  );
  assert.equal(few.completion.hasMore, false);
});

test("a module slower than the bound answers nothing, on time, and its call is abandoned", async () => {
  const started = performance.now();
  const slow = await client.complete({
    ref: { type: "ref/prompt", name: "words.pick" },
    argument: { name: "slow", value: "" },
  });
  const took = performance.now() - started;
  assert.deepEqual(slow.completion.values, []);
  assert.equal(slow.completion.hasMore, true);
  assert.ok(took >= completionTimeoutMs - 100, `answered after ${Math.round(took)} ms`);
  assert.ok(took < completionTimeoutMs + 5_000, `answered after ${Math.round(took)} ms`);
  assert.equal(slowCallsAborted, 1);
});
