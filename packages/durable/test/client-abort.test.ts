/**
 * Every durable HTTP client call honours its abort signal against a server that never answers (a TCP
 * listener that accepts and stays silent): a signal aborted before the call rejects at once with
 * `aborted` and sends nothing; one aborted mid-wait rejects within a moment and closes the connection;
 * the client's deadline ends a wait nobody aborts with `timeout`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ToolAbortedError, ToolTimeoutError } from "@tackle/core";
import { DurableError } from "@tackle/durable";
import { createDurableClient, type DurableClient } from "@tackle/durable/http";
import { itHonoursAbort, type SilentServer, startSilentServer, underLoadMs } from "@tackle/test-support";

type Entry = readonly [string, (client: DurableClient, signal: AbortSignal) => Promise<unknown>];

/** Reads the frames until they end. */
async function drain(frames: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of frames);
}

const entryPoints: readonly Entry[] = [
  ["start", (client, signal) => client.start("demo", { n: 1 }, { signal })],
  ["start (with ids)", (client, signal) => client.start("demo", {}, { threadId: "t", runId: "r", signal })],
  ["get", (client, signal) => client.get("t", { signal })],
  ["resume", (client, signal) => client.resume("t", { "interrupt-1": true }, { signal })],
  ["frames", (client, signal) => drain(client.frames("t", { signal }))],
];

const isAborted = (error: unknown) => {
  assert.ok(ToolAbortedError.isInstance(error), `expected an aborted error, got ${String(error)}`);
  assert.equal(error.code, "aborted");
  return true;
};

describe("durable HTTP client against a server that never answers", () => {
  let silent: SilentServer;
  before(async () => {
    silent = await startSilentServer();
  });
  after(() => silent.close());

  for (const [name, call] of entryPoints)
    itHonoursAbort(
      { name, call },
      (url) => createDurableClient({ baseUrl: url, timeoutMs: 30_000 }),
      isAborted,
    );

  it("the client's deadline ends a call nobody aborts with timeout", async () => {
    const quick = createDurableClient({ baseUrl: silent.url, timeoutMs: 150 });
    const started = performance.now();
    await assert.rejects(
      quick.get("t"),
      (error: unknown) => ToolTimeoutError.isInstance(error) && error.retryable,
    );
    // Its 150 ms deadline, not the 30 s one of the other client: 1 s quiet, scaled by the load.
    assert.ok(performance.now() - started < underLoadMs(1000));
    assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
  });

  it("frames from a server that accepts and never answers fail unreachable, each silent connection closed", async () => {
    const quick = createDurableClient({
      baseUrl: silent.url,
      timeoutMs: 150,
      reconnectDelayMs: 20,
      unreachableAfterMs: 400,
    });
    const accepted = silent.accepted;
    const started = performance.now();
    await assert.rejects(
      drain(quick.frames("t")),
      (error: unknown) => DurableError.isInstance(error) && error.code === "unreachable",
    );
    const took = performance.now() - started;
    assert.ok(took >= 350 && took < underLoadMs(3000), `gave up after ${Math.round(took)} ms`);
    assert.ok(silent.accepted - accepted >= 2, "it reconnected before giving up");
    assert.ok(await silent.waitForNoneOpen(), "every connection was closed");
  });
});
