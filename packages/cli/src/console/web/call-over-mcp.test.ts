import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { createEmbeddedToolSource } from "../../tool-source/create-embedded-tool-source.ts";
import { callOverMcp, type RpcMessage } from "./call-over-mcp.ts";

const count = defineTool({
  name: "count",
  description: "Counts to n, reporting each step and logging it",
  input: z.object({ n: z.number().int().min(1) }),
  output: z.object({ counted: z.number() }),
  execute: async ({ n }, context) => {
    for (let step = 1; step <= n; step++) {
      context.progress(step, n, `step ${step}`);
      context.logger.info(`counted ${step}`);
    }
    return { counted: n };
  },
});

const source = createEmbeddedToolSource([
  { module: "steps", toolset: createToolSet([count]), errors: [], close: () => {} },
]);

test("a call's exchange is recorded as it crosses: the request, its progress and log notifications, the result", async () => {
  const messages: RpcMessage[] = [];
  const answer = await callOverMcp(
    source,
    "steps.count",
    { n: 3 },
    {
      timeoutMs: 10_000,
      onMessage: (message) => messages.push(message),
    },
  );
  assert.equal(answer.ok, true);
  assert.deepEqual(answer.ok && answer.output, { counted: 3 });
  assert.deepEqual(answer.result.structuredContent, { counted: 3 });

  const [request, ...rest] = messages;
  assert.equal(request?.direction, "sent");
  const sent = request?.message as { method?: string; params?: Record<string, unknown> };
  assert.equal(sent.method, "tools/call");
  assert.deepEqual((sent.params as { arguments: unknown }).arguments, { n: 3 });
  // The request asked for progress: a token in its _meta.
  assert.notEqual((sent.params as { _meta?: { progressToken?: unknown } })._meta?.progressToken, undefined);

  const methods = rest.map((entry) => (entry.message as { method?: string }).method ?? "result");
  assert.deepEqual(
    methods.filter((method) => method === "notifications/progress").length,
    3,
    `three progress reports in ${methods.join(", ")}`,
  );
  assert.ok(methods.filter((method) => method === "notifications/message").length >= 3, methods.join(", "));
  // The response is the last message, and every message was received from the server after the request.
  assert.equal(methods.at(-1), "result");
  assert.ok(rest.every((entry) => entry.direction === "received"));
  assert.ok(answer.ms >= 0);
});

test("a refused input answers the tool's coded error, issues included", async () => {
  const answer = await callOverMcp(
    source,
    "steps.count",
    { n: 0 },
    { timeoutMs: 10_000, onMessage: () => {} },
  );
  assert.equal(answer.ok, false);
  if (answer.ok) return;
  assert.equal(answer.error.code, "invalid_input");
  assert.equal(answer.result.isError, true);
  const issues = (answer.error as { data?: { issues?: { path: unknown[] }[] } }).data?.issues ?? [];
  assert.deepEqual(issues[0]?.path, ["n"]);
});

test("the catalogue carries a tool's output schema", async () => {
  const [info] = await source.catalogue();
  assert.equal(info?.tools[0]?.outputSchema?.type, "object");
});

test("the page gets a declared structure past the model's budget whole: a person reads it (ADR 0272)", async () => {
  const rows = Array.from({ length: 3_000 }, (_, id) => ({ id, name: `row ${id}` }));
  const listed = createEmbeddedToolSource([
    {
      module: "big",
      toolset: createToolSet([
        defineTool({
          name: "rows",
          description: "Rows past the default budget of 8,000 tokens",
          input: z.object({}),
          output: z.object({ rows: z.array(z.object({ id: z.number(), name: z.string() })) }),
          execute: () => ({ rows }),
        }),
      ]),
      errors: [],
      close: () => {},
    },
  ]);
  const answer = await callOverMcp(listed, "big.rows", {}, { timeoutMs: 10_000, onMessage: () => {} });
  assert.equal(answer.ok, true);
  assert.deepEqual(answer.ok && answer.output, { rows });
  assert.equal(answer.result._meta?.["tackle/resultPage"], undefined, "not cut");
});
