/**
 * A body past `maxBodyBytes` is refused 413 `payload_too_large`, and the refusal names the bound, in
 * words and in `data.maxBytes`, so a caller knows how much it may send: a declared length past it, a
 * chunked body once its bytes pass it, and the client's error alike; not retryable, in the shape of
 * every other error body; a body at the bound is read.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { ToolError } from "@tackle/core";
import { createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { createDurableClient, type DurableServer, serveDurable } from "@tackle/durable/http";

const echo = createGraph<{ text: string }>("echo").node("echo", (state) => ({ text: state.text }));

let runner: Runner;
let small: DurableServer;
let standard: DurableServer;
before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [echo] });
  small = await serveDurable({ runner, maxBodyBytes: 4096 });
  standard = await serveDurable({ runner });
});
after(async () => {
  await small.close();
  await standard.close();
  await runner.close();
});

/** A start of `echo` whose JSON body is exactly `bytes` long. */
function startBody(bytes: number): string {
  const empty = JSON.stringify({ graph: "echo", input: { text: "" } });
  return JSON.stringify({ graph: "echo", input: { text: "x".repeat(bytes - empty.length) } });
}

interface Refusal {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly data: { readonly maxBytes: number };
}

async function refusal(response: Response): Promise<Refusal> {
  assert.equal(response.status, 413);
  return ((await response.json()) as { error: Refusal }).error;
}

it("names the bound of a declared length past it, in words and in data.maxBytes", async () => {
  const response = await fetch(`${standard.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    signal: AbortSignal.timeout(10_000),
    body: startBody(1024 * 1024 + 1),
  });
  assert.deepEqual(await refusal(response), {
    code: "payload_too_large",
    message: "The request body is over 1 MiB (1048576 bytes), the most this server reads",
    retryable: false,
    data: { maxBytes: 1048576 },
  });
});

it("names the bound of a chunked body once its bytes pass it", async () => {
  // Three chunks of 2 KiB, no length declared: the bound is passed in the third.
  const chunks = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let index = 0; index < 3; index += 1)
        controller.enqueue(new TextEncoder().encode("x".repeat(2048)));
      controller.close();
    },
  });
  const response = await fetch(`${small.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: chunks,
    duplex: "half",
    signal: AbortSignal.timeout(10_000),
  } as RequestInit);
  assert.deepEqual(await refusal(response), {
    code: "payload_too_large",
    message: "The request body is over 4 KiB (4096 bytes), the most this server reads",
    retryable: false,
    data: { maxBytes: 4096 },
  });
});

it("reads a body at the bound, and the client's error names the bound of one past it", async () => {
  const client = createDurableClient({ baseUrl: small.url });
  const at = await fetch(`${small.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    signal: AbortSignal.timeout(10_000),
    body: startBody(4096),
  });
  assert.equal(at.status, 201, await at.clone().text());
  await at.body?.cancel();

  const refused = await client.start("echo", { text: "x".repeat(4096) }).then(
    () => assert.fail("a start past the bound was read"),
    (error: unknown) => error,
  );
  assert.ok(ToolError.isInstance(refused), String(refused));
  assert.equal(refused.code, "payload_too_large");
  assert.equal(refused.message, "The request body is over 4 KiB (4096 bytes), the most this server reads");
  assert.deepEqual(refused.data, { maxBytes: 4096 });
  assert.equal(refused.retryable, false);
});
