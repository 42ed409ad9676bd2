/**
 * The console's MCP endpoint over real HTTP hands a tool the arguments its client sent, hostile keys
 * included, for the tool's own schema to judge. The MCP SDK parses a `tools/call`'s `arguments` as a
 * record, assigning keys, so a top-level `__proto__` key is dropped (or becomes the record's prototype)
 * before any tool sees it: a strict schema that refuses the key accepted the call, and a pass-through
 * one lost it. Every way a call reaches the console is checked against the schema applied directly
 * (its Standard Schema `validate`; zod's `safeParse`): an SDK client on a 2025 session (the SDK's
 * parse) and pinned to 2026-07-28 (the console's direct path), a raw session-less call answered
 * directly, and a raw one the SDK serves (a progress token), on both revisions.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createToolSet, defineTool, silentLogger, type ToolSchema } from "@tackle/core";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { readJsonRpc } from "./json-rpc-response.ts";

const token = "test-token-sent-arguments-0123";
/** What each call's handler was given, in order. */
const seen: unknown[] = [];
const record = (input: unknown) => {
  seen.push(input);
  return { saved: true };
};
/**
 * A schema that hands a tool its arguments as sent, whatever keys they hold (zod's loose objects drop a
 * top-level `__proto__` themselves: that is their verdict, which the console must reach too).
 */
const passThrough: ToolSchema<Record<string, unknown>> = {
  "~standard": {
    version: 1,
    vendor: "tackle-test",
    validate: (value) =>
      typeof value === "object" && value !== null && !Array.isArray(value)
        ? { value: value as Record<string, unknown> }
        : { issues: [{ message: "Expected an object" }] },
    jsonSchema: {
      input: () => ({ type: "object", additionalProperties: true }),
      output: () => ({ type: "object", additionalProperties: true }),
    },
  },
};
const schemas = {
  strict: z.strictObject({
    title: z.string(),
    n: z.number(),
    meta: z.strictObject({ label: z.string() }).optional(),
  }),
  loose: z.looseObject({ id: z.string(), nested: z.looseObject({ label: z.string() }).optional() }),
  passthrough: passThrough,
} as const;
type ToolName = keyof typeof schemas;
const tools = (Object.keys(schemas) as ToolName[]).map((name) =>
  defineTool({
    name,
    description: `Saves (${name} schema).`,
    input: schemas[name] as ToolSchema<unknown>,
    execute: record,
  }),
);

/** The schema applied directly: the verdict every path to the tool must reach. */
function judge(tool: ToolName, value: unknown): { success: boolean; data?: unknown } {
  const result = schemas[tool]["~standard"].validate(value);
  assert.ok(!(result instanceof Promise));
  return result.issues === undefined ? { success: true, data: result.value } : { success: false };
}

/** Arguments as JSON text, so each key reaches the wire as written. */
const cases: readonly [ToolName, string][] = [
  ["strict", '{"__proto__":{"n":1},"title":"t","n":2}'],
  ["strict", '{"title":"t","__proto__":5,"n":2}'],
  ["strict", '{"title":"t","n":2,"constructor":{"prototype":{"polluted":true}}}'],
  ["strict", '{"title":"t","n":2,"meta":{"label":"x","__proto__":{"label":"y"}}}'],
  ["strict", '{"title":"t","n":2,"meta":{"label":"x","constructor":{}}}'],
  ["strict", '{"title":"t","n":2,"meta":{"label":"x"}}'],
  ["loose", '{"id":"a","__proto__":{"x":1}}'],
  ["loose", '{"id":"a","constructor":{"prototype":{"polluted":true}}}'],
  ["loose", '{"id":"a","nested":{"label":"x","__proto__":{"y":1},"constructor":{"prototype":{}}}}'],
  ["passthrough", '{"id":"a","__proto__":{"x":1}}'],
  ["passthrough", '{"__proto__":5,"id":"a"}'],
  ["passthrough", '{"__proto__":null,"constructor":{"prototype":{"polluted":true}}}'],
  [
    "passthrough",
    '{"nested":{"__proto__":{"y":1},"constructor":{"prototype":{}}},"list":[{"__proto__":[]}]}',
  ],
];

let served: RunningConsole;
before(async () => {
  const source = createEmbeddedToolSource([
    { module: "keys", toolset: createToolSet(tools), errors: [], close: () => {} },
  ]);
  served = await startConsole({
    source,
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
});
after(() => served.close());

interface Answer {
  readonly isError?: boolean;
  readonly structuredContent?: unknown;
}

/** A call the way each client sends it: its answer's result. */
type Send = (name: string, args: Record<string, unknown>) => Promise<Answer>;

async function sdkClient(mode: "legacy" | { pin: string }): Promise<{ send: Send; close(): Promise<void> }> {
  const client = new Client({ name: "sent-arguments", version: "1" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(served.url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return {
    send: (name, args) => client.callTool({ name, arguments: args }) as Promise<Answer>,
    close: () => client.close(),
  };
}

const envelope = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

/**
 * A raw session-less `tools/call` posted with fetch: the arguments' own `__proto__` keys go out as
 * written (`JSON.stringify` writes own keys). `viaSdk`: a progress token, which the console's direct
 * path leaves to the SDK's serving.
 */
function raw(revision: "2026-07-28" | "2025-06-18", viaSdk: boolean): Send {
  return async (name, args) => {
    const progress = viaSdk ? { progressToken: "p" } : {};
    const meta = revision === "2026-07-28" ? { ...envelope, ...progress } : viaSdk ? progress : undefined;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
      "mcp-protocol-version": revision,
      ...(revision === "2026-07-28" ? { "mcp-method": "tools/call", "mcp-name": name } : {}),
    };
    const params = { name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) };
    const response = await fetch(served.url, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params }),
    });
    const message = await readJsonRpc(response);
    assert.equal(message.error, undefined, `a result, not ${JSON.stringify(message.error)}`);
    return message.result as Answer;
  };
}

/** Each call's answer against `safeParse`: accepted iff the schema accepts, with what it parsed. */
async function checkAll(label: string, send: Send): Promise<void> {
  for (const [tool, text] of cases) {
    const where = `${label}: keys.${tool} ${text}`;
    const expected = judge(tool, JSON.parse(text));
    seen.length = 0;
    const answer = await send(`keys.${tool}`, JSON.parse(text));
    if (expected.success) {
      assert.notEqual(answer.isError, true, `${where}: refused what the schema accepts`);
      assert.equal(seen.length, 1, where);
      assert.deepStrictEqual(seen[0], expected.data, `${where}: the tool was handed another value`);
    } else {
      assert.equal(seen.length, 0, `${where}: the tool ran on arguments its schema refuses`);
      assert.equal(answer.isError, true, where);
      const error = (answer.structuredContent as { error?: { code?: unknown } } | undefined)?.error;
      assert.equal(error?.code, "invalid_input", `${where}: refused as ${JSON.stringify(error)}`);
    }
  }
}

test("the oracle: a strict schema refuses a __proto__ key, the pass-through one keeps it as an own key", () => {
  assert.equal(judge("strict", JSON.parse('{"__proto__":{},"title":"t","n":2}')).success, false);
  const kept = judge("passthrough", JSON.parse('{"id":"a","__proto__":{"x":1}}')).data as object;
  assert.ok(Object.hasOwn(kept, "__proto__"));
  assert.equal(Object.getPrototypeOf(kept), Object.prototype);
});

for (const mode of ["legacy", { pin: "2026-07-28" }] as const) {
  const label = mode === "legacy" ? "an SDK client on a 2025 session" : "an SDK client pinned to 2026-07-28";
  test(`${label}: each call is judged on the arguments as sent, __proto__ and constructor keys included`, async () => {
    const client = await sdkClient(mode);
    try {
      await checkAll(label, client.send);
    } finally {
      await client.close();
    }
  });
}

for (const revision of ["2026-07-28", "2025-06-18"] as const) {
  for (const viaSdk of [false, true]) {
    const label = `a raw session-less ${revision} call ${viaSdk ? "the SDK serves (a progress token)" : "answered directly"}`;
    test(`${label}: judged on the arguments as sent`, () => checkAll(label, raw(revision, viaSdk)));
  }
}

for (const [label, send] of [
  [
    "an SDK client on a 2025 session",
    async (name: string, args: Record<string, unknown>) => {
      const client = await sdkClient("legacy");
      try {
        return await client.send(name, args);
      } finally {
        await client.close();
      }
    },
  ],
  ["a raw 2026-07-28 call the SDK serves", raw("2026-07-28", true)],
] as const) {
  test(`${label}: a tool whose schema passes unknown keys through is handed the __proto__ own key intact`, async () => {
    seen.length = 0;
    const answer = await send("keys.passthrough", JSON.parse('{"id":"a","__proto__":{"x":1}}'));
    assert.notEqual(answer.isError, true);
    const input = seen[0] as Record<string, unknown>;
    assert.ok(Object.hasOwn(input, "__proto__"), "the key is the input's own");
    assert.deepEqual(Object.getOwnPropertyDescriptor(input, "__proto__")?.value, { x: 1 });
    assert.equal(Object.getPrototypeOf(input), Object.prototype, "and not its prototype");
  });
}
