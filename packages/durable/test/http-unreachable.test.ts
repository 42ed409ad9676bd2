/** The client's frames with the durable server gone: an outage is told (`unreachable`), and an abort ends the wait. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { DurableError } from "@tackle/durable";
import { createDurableClient } from "@tackle/durable/http";
import { freePort } from "@tackle/test-support";

async function drain(frames: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of frames);
}

test("frames from a server that never answers fail unreachable, naming it, instead of reconnecting forever", async () => {
  const baseUrl = `http://127.0.0.1:${await freePort()}`;
  const client = createDurableClient({ baseUrl, reconnectDelayMs: 50, unreachableAfterMs: 600 });
  const started = Date.now();
  await assert.rejects(drain(client.frames("t-1")), (error) => {
    assert.ok(DurableError.isInstance(error), String(error));
    assert.equal(error.code, "unreachable");
    assert.equal(error.retryable, true);
    assert.match(error.message, new RegExp(`The durable server at ${baseUrl} has not answered for \\d+ s`));
    return true;
  });
  const took = Date.now() - started;
  assert.ok(took >= 550 && took < 5_000, `gave up after ${took} ms`);
});

test("an abort while the client waits to reconnect ends the wait at once", async () => {
  const client = createDurableClient({
    baseUrl: `http://127.0.0.1:${await freePort()}`,
    reconnectDelayMs: 60_000,
    unreachableAfterMs: 600_000,
  });
  const controller = new AbortController();
  const started = Date.now();
  setTimeout(() => controller.abort(new Error("the caller gave up")), 200);
  await assert.rejects(drain(client.frames("t-1", { signal: controller.signal })));
  assert.ok(Date.now() - started < 5_000, "not at the end of the 60 s reconnect wait");
});
