/**
 * Every `MemoryClient` call honours its abort signal against a service that never answers (a TCP
 * listener that accepts and stays silent): a signal aborted before the call rejects at once with
 * `aborted` and sends nothing; one aborted mid-wait rejects within a moment and closes the connection.
 * The memory tools hand their call's signal to the client, so an aborted tool call closes it too.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createToolSet, ToolAbortedError } from "@tackle/core";
import { createMemoryTools, MemoryClient, MemoryTimeoutError } from "@tackle/memory";
import { itHonoursAbort, type SilentServer, startSilentServer } from "@tackle/test-support";

const id = "mem_0000000000000000";
type Entry = readonly [string, (client: MemoryClient, signal: AbortSignal) => Promise<unknown>];

const entryPoints: readonly Entry[] = [
  ["search", (client, signal) => client.search({ query: "tea" }, { signal })],
  ["add", (client, signal) => client.add({ content: "I drink tea." }, { signal })],
  ["addBatch", (client, signal) => client.addBatch({ memories: [{ content: "I drink tea." }] }, { signal })],
  [
    "writeEvent",
    (client, signal) => client.writeEvent({ sessionId: "s", role: "user", content: "hello" }, { signal }),
  ],
  ["recallConversation", (client, signal) => client.recallConversation({ sessionId: "s" }, { signal })],
  ["getMemory", (client, signal) => client.getMemory(id, { signal })],
  ["updateMemory", (client, signal) => client.updateMemory(id, { importance: 0.5 }, { signal })],
  ["deleteMemory", (client, signal) => client.deleteMemory(id, {}, { signal })],
  ["memoryHistory", (client, signal) => client.memoryHistory(id, { signal })],
  ["recordFeedback", (client, signal) => client.recordFeedback(id, { rating: "helpful" }, { signal })],
  ["profile", (client, signal) => client.profile({}, { signal })],
  ["contextBundle", (client, signal) => client.contextBundle({}, { signal })],
  ["unifiedState", (client, signal) => client.unifiedState({}, { signal })],
  ["status", (client, signal) => client.status({ signal })],
  ["consolidate", (client, signal) => client.consolidate({}, { signal })],
  ["listTraces", (client, signal) => client.listTraces({}, { signal })],
  ["listJobs", (client, signal) => client.listJobs({}, { signal })],
  ["getJob", (client, signal) => client.getJob(id, { signal })],
  ["waitForJob", (client, signal) => client.waitForJob(id, { signal })],
];

const isAborted = (error: unknown) => {
  assert.ok(ToolAbortedError.isInstance(error), `expected an aborted error, got ${String(error)}`);
  assert.equal(error.code, "aborted");
  return true;
};

describe("MemoryClient against a service that never answers", () => {
  let silent: SilentServer;
  let client: MemoryClient;
  before(async () => {
    silent = await startSilentServer();
    // Only the signal can end these calls: the deadline is far away and nothing is retried.
    client = new MemoryClient({ baseUrl: silent.url, allowPrivateNetwork: true, timeoutMs: 30_000 });
  });
  after(() => silent.close());

  for (const [name, call] of entryPoints)
    itHonoursAbort(
      { name, call },
      (url) => new MemoryClient({ baseUrl: url, allowPrivateNetwork: true, timeoutMs: 30_000 }),
      isAborted,
    );

  it("a memory tool call aborted mid-wait closes the client's connection", async () => {
    const tools = createToolSet(createMemoryTools(client));
    const accepted = silent.accepted;
    const controller = new AbortController();
    const pending = tools.call("memory_search", { query: "tea" }, { signal: controller.signal });
    assert.ok(await silent.waitForConnection(accepted + 1), "the request reached the server");
    controller.abort();
    const result = await pending;
    assert.equal(result.ok, false);
    assert.equal(result.ok ? undefined : result.error.code, "aborted");
    assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
  });

  it("a call's deadline ends the wait with timeout and closes the connection", async () => {
    const quick = new MemoryClient({
      baseUrl: silent.url,
      allowPrivateNetwork: true,
      timeoutMs: 150,
      maxRetries: 0,
    });
    const started = performance.now();
    await assert.rejects(quick.status(), (error: unknown) => MemoryTimeoutError.isInstance(error));
    assert.ok(performance.now() - started < 1000);
    assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
  });
});
