/**
 * The console tool source honours a call's abort signal, against a console over real HTTP whose tool
 * never answers: a signal aborted before the call gives `aborted` at once and the tool never starts;
 * one aborted mid-call gives `aborted` within a moment, and the console aborts the tool's own signal.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createToolSet, defineTool, silentLogger, ToolAbortedError } from "@tackle/core";
import { promptlyMs } from "@tackle/test-support";
import { z } from "zod";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createConsoleToolSource } from "../src/tool-source/create-console-tool-source.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import type { ToolSource } from "../src/tool-source/tool-source.ts";

const token = "test-token-console-source-abort-01";
let started = 0;
let stopped = 0;

/** Waits for its signal and nothing else (its own deadline is far away). */
const hang = defineTool({
  name: "hang",
  description: "Never answers; counts its starts and the aborts of its signal",
  input: z.object({}),
  timeoutMs: 60_000,
  execute: (_input, context) => {
    started += 1;
    return new Promise((_, reject) => {
      context.signal.addEventListener("abort", () => {
        stopped += 1;
        reject(context.signal.reason);
      });
    });
  },
});

let running: RunningConsole;
let source: ToolSource;

before(async () => {
  running = await startConsole({
    source: createEmbeddedToolSource([
      { module: "slow", toolset: createToolSet([hang]), errors: [], close: () => {} },
    ]),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
  source = await createConsoleToolSource({ url: running.url, token });
});
after(async () => {
  await source?.close();
  await running?.close();
});

function assertAborted(result: Awaited<ReturnType<ToolSource["call"]>>): void {
  assert.equal(result.ok, false);
  const error = result.ok ? undefined : result.error;
  assert.ok(ToolAbortedError.isInstance(error), `expected aborted, got ${error?.code}: ${error?.message}`);
  assert.equal(error.code, "aborted");
}

test("a signal aborted before the call gives aborted at once; the tool never starts", async () => {
  const before = started;
  const at = performance.now();
  assertAborted(await source.call("slow.hang", {}, { signal: AbortSignal.abort() }));
  assert.ok(performance.now() - at < promptlyMs, "at once");
  await sleep(100);
  assert.equal(started, before, "the tool did not start");
});

test("a signal aborted mid-call gives aborted within a moment, and the console aborts the tool", async () => {
  const controller = new AbortController();
  const pending = source.call("slow.hang", {}, { signal: controller.signal });
  const deadline = Date.now() + 5000;
  while (started === 0 && Date.now() < deadline) await sleep(10);
  assert.ok(started > 0, "the tool started");
  const stoppedBefore = stopped;
  const at = performance.now();
  controller.abort();
  assertAborted(await pending);
  const elapsed = performance.now() - at;
  assert.ok(elapsed < promptlyMs, `${Math.round(elapsed)} ms after the abort`);
  while (stopped === stoppedBefore && Date.now() < deadline) await sleep(10);
  assert.equal(stopped, stoppedBefore + 1, "the tool's signal was aborted on the console");
});
