/**
 * A tenant's slow bodies hold at most `maxInFlight` requests on the host: a tenant streaming bodies
 * slowly (each under the body limit, every one legal) is answered 429 with Retry-After past the bound,
 * before its body is read (a chunked one too: the place is taken before the body limit reads it);
 * another tenant's writes go through meanwhile; the slots free when the slow requests end. A body past
 * the limit is 413, and without a key 401 unread. A bound that is not a whole number of at least 1 is
 * refused before the service starts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createMemoryApp, type MemoryServer, serveMemory } from "@tackle/memory/server";

let directory: string;
let server: MemoryServer;
before(async () => {
  directory = mkdtempSync(join(tmpdir(), "memory-in-flight-"));
  server = await serveMemory({
    store: join(directory, "memories.db"),
    apiKeys: { "key-a": "tenant-a", "key-b": "tenant-b" },
    port: 0,
    maxInFlight: 2,
  });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const add = (key: string, content: string) =>
  fetch(`${server.url}/v1/memories`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ userId: "u", content }),
  });

/**
 * A POST whose body promises 100 KB and sends 10 bytes, or (`chunked`) sends one chunk and no end: it
 * stays in flight until destroyed.
 */
function slowBody(chunked = false) {
  const url = new URL(`${server.url}/v1/memories`);
  const slow = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    headers: {
      authorization: "Bearer key-a",
      "content-type": "application/json",
      ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": 100_000 }),
    },
  });
  slow.on("error", () => undefined);
  slow.write('{"userId":');
  return slow;
}

for (const chunked of [false, true]) {
  it(`holds a tenant to two bodies in flight${chunked ? " (chunked, no length: counted before the body limit reads them)" : ""}, refuses the third with Retry-After, leaves another tenant alone`, async () => {
    const slow = [slowBody(chunked), slowBody(chunked)];
    let refused: Response | undefined;
    for (let attempt = 0; attempt < 100 && refused === undefined; attempt += 1) {
      const response = await add("key-a", `probe ${attempt}`);
      if (response.status === 429) refused = response;
      else {
        assert.ok(response.ok, String(response.status));
        await sleep(20);
      }
    }
    assert.ok(refused !== undefined, "the third request in flight was never refused");
    assert.equal(refused.headers.get("retry-after"), "1");
    const { error } = (await refused.json()) as {
      error: { code: string; retryable: boolean; data: { retryAfterSeconds: number; inFlight: number } };
    };
    assert.equal(error.code, "rate_limited");
    assert.equal(error.retryable, true);
    assert.deepEqual(error.data, { retryAfterSeconds: 1, inFlight: 2 });
    assert.equal((await add("key-b", "another tenant writes")).ok, true);
    assert.equal(
      (await fetch(`${server.url}/v1/status`, { headers: { authorization: "Bearer key-a" } })).status,
      200,
    );

    for (const request of slow) request.destroy();
    let freed = false;
    for (let attempt = 0; attempt < 100 && !freed; attempt += 1) {
      freed = (await add("key-a", "after the slow ones")).ok;
      if (!freed) await sleep(20);
    }
    assert.ok(freed, "the slots never came back");
  });
}

it("refuses a body past the limit 413 payload_too_large, with a length or chunked; without a key 401, unread", async () => {
  const big = JSON.stringify({ userId: "u", content: "x".repeat(5 * 1024 * 1024) });
  const send = (key: string | undefined, chunked: boolean) =>
    fetch(`${server.url}/v1/memories`, {
      method: "POST",
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        "content-type": "application/json",
      },
      body: chunked ? new Blob([big]).stream() : big,
      ...(chunked ? { duplex: "half" } : {}),
    } as RequestInit);
  for (const chunked of [false, true]) {
    const refused = await send("key-a", chunked);
    assert.equal(refused.status, 413, `chunked ${chunked}`);
    const { error } = (await refused.json()) as { error: { code: string } };
    assert.equal(error.code, "payload_too_large");
    assert.equal((await send(undefined, chunked)).status, 401, `chunked ${chunked}, no key`);
  }
  assert.equal((await add("key-a", "a body within the limit")).ok, true);
});

it("refuses a maxInFlight of 0, 1.5, Infinity or NaN before it serves, naming maxInFlight", async () => {
  for (const maxInFlight of [0, 1.5, Number.POSITIVE_INFINITY, Number.NaN]) {
    const outcome = await serveMemory({
      store: join(directory, `bound-${maxInFlight}.db`),
      apiKeys: { "key-a": "tenant-a" },
      port: 0,
      maxInFlight,
    }).then(
      (started) => started.close().then(() => "served"),
      (error: unknown) => error,
    );
    assert.ok(outcome instanceof RangeError, `${maxInFlight}: ${String(outcome)}`);
    assert.match(outcome.message, /^maxInFlight must be an integer ≥ 1/, String(maxInFlight));
    assert.throws(
      () => createMemoryApp({ service: server.service, apiKeys: { "key-a": "tenant-a" }, maxInFlight }),
      /maxInFlight must be an integer ≥ 1/,
    );
  }
});
