/**
 * The console tool source (what `tackle mcp --console`, `tackle call --console` and `tackle tools
 * --console` read from), against a console over real HTTP: a call's log lines reach that call's own
 * logger at the level it asked for, concurrent calls' lines each their own; and every progress report
 * and log line the console sends before a result is handed over before the call returns, even when
 * all of them arrive in one read.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createToolSet, defineTool, type Logger, silentLogger, type ToolProgress } from "@tackle/core";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createConsoleToolSource } from "../src/tool-source/create-console-tool-source.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";

const token = "test-token-console-source-0123";

const narrate = defineTool({
  name: "narrate",
  description: "Three numbered log lines with its label, a tick apart, and one debug line",
  input: z.object({ label: z.string() }),
  execute: async ({ label }, context) => {
    context.logger.debug(`${label} starts`);
    for (let line = 1; line <= 3; line++) {
      context.logger.info(`${label} ${line}`, { line });
      await sleep(20);
    }
    context.logger.warn(`${label} done`);
    return { label };
  },
});

let running: RunningConsole;

before(async () => {
  running = await startConsole({
    source: createEmbeddedToolSource([
      { module: "talk", toolset: createToolSet([narrate]), errors: [], close: () => {} },
    ]),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
});
after(async () => {
  await running?.close();
});

/** A logger that writes `level message fields?` lines into `lines`. */
function recordingLogger(lines: string[]): Logger {
  const write =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void => {
      lines.push(
        fields === undefined ? `${level} ${message}` : `${level} ${message} ${JSON.stringify(fields)}`,
      );
    };
  return { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
}

test("a call's log lines reach its own logger at its level; concurrent calls each get their own", async () => {
  const source = await createConsoleToolSource({ url: running.url, token });
  try {
    const first: string[] = [];
    const second: string[] = [];
    const [a, b] = await Promise.all([
      source.call("talk.narrate", { label: "a" }, { logger: recordingLogger(first), logLevel: "info" }),
      source.call("talk.narrate", { label: "b" }, { logger: recordingLogger(second), logLevel: "debug" }),
    ]);
    assert.deepEqual(a, { ok: true, output: { label: "a" } });
    assert.deepEqual(b, { ok: true, output: { label: "b" } });
    assert.deepEqual(first, [
      'info a 1 {"line":1}',
      'info a 2 {"line":2}',
      'info a 3 {"line":3}',
      "warn a done",
    ]);
    assert.deepEqual(second, [
      "debug b starts",
      'info b 1 {"line":1}',
      'info b 2 {"line":2}',
      'info b 3 {"line":3}',
      "warn b done",
    ]);

    // A logger without a level asks for nothing, and gets nothing.
    const unasked: string[] = [];
    const plain = await source.call("talk.narrate", { label: "c" }, { logger: recordingLogger(unasked) });
    assert.deepEqual(plain, { ok: true, output: { label: "c" } });
    assert.deepEqual(unasked, []);
  } finally {
    await source.close();
  }
});

/**
 * A console stand-in that writes a call's whole answer (three progress reports, two log lines and the
 * result) in one write, so that the source reads them in one chunk.
 */
async function oneChunkConsole(): Promise<{ url: string; server: Server }> {
  const server = createServer(async (request, response) => {
    let body = "";
    for await (const chunk of request) body += chunk;
    const message = JSON.parse(body) as { id: number; method: string; params?: { _meta?: object } };
    if (message.method === "server/discover") {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: message.id,
          result: {
            supportedVersions: ["2026-07-28"],
            capabilities: { tools: {}, logging: {} },
            resultType: "complete",
            _meta: { "io.modelcontextprotocol/serverInfo": { name: "one-chunk", version: "1" } },
          },
        }),
      );
      return;
    }
    const progressToken = (message.params?._meta as { progressToken?: unknown } | undefined)?.progressToken;
    const event = (payload: object) =>
      `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", ...payload })}\n\n`;
    let answer = "";
    for (let step = 1; step <= 3; step++) {
      answer += event({
        method: "notifications/progress",
        params: { progressToken, progress: step, total: 3 },
      });
      answer += event({
        method: "notifications/message",
        params: { level: "info", logger: "t.steps", data: { message: `step ${step}`, step } },
      });
    }
    answer += event({
      id: message.id,
      result: {
        content: [{ type: "text", text: '{"done":true}' }],
        structuredContent: { done: true },
        resultType: "complete",
      },
    });
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.end(answer);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/mcp`, server };
}

test("every report and log line read in the same chunk as the result is handed over, in order, before the call returns", async () => {
  const { url, server } = await oneChunkConsole();
  const source = await createConsoleToolSource({ url, token });
  try {
    for (let round = 0; round < 5; round++) {
      const seen: string[] = [];
      const logger = recordingLogger(seen);
      const result = await source.call(
        "t.steps",
        {},
        {
          onProgress: ({ progress, total }: ToolProgress) => seen.push(`progress ${progress}/${total}`),
          logger,
          logLevel: "info",
        },
      );
      assert.deepEqual(result, { ok: true, output: { done: true } });
      assert.deepEqual(seen, [
        "progress 1/3",
        'info step 1 {"step":1}',
        "progress 2/3",
        'info step 2 {"step":2}',
        "progress 3/3",
        'info step 3 {"step":3}',
      ]);
    }
  } finally {
    await source.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
