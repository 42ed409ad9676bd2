/** `MemoryClient` against services that fail: retries with jittered backoff, give-ups, timeouts, refused connections. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemoryClient, type MemoryError, MemoryNetworkError, MemoryTimeoutError } from "@tackle/memory";
import { freePort } from "@tackle/test-support";
import { json, startFlakyServer } from "./support/start-flaky-server.ts";

describe("MemoryClient retries: backoff", () => {
  it("retries 5xx and 429 with backoff (honouring Retry-After), never 4xx", async () => {
    const answers = [
      [503, { error: { code: "unavailable", message: "busy" } }],
      [429, { error: { code: "rate_limited", message: "slow down" } }, { "retry-after": "0" }],
      [200, { ok: true }],
    ] as const;
    const flaky = await startFlakyServer((_request, response, index) => {
      const [status, body, headers] = answers[Math.min(index, 2)]!;
      json(response, status, body, headers ?? {});
    });
    try {
      const client = new MemoryClient({ baseUrl: flaky.url, allowPrivateNetwork: true, retryBaseMs: 5 });
      assert.deepEqual(await client.status(), { ok: true });
      assert.equal(flaky.requests.length, 3);
    } finally {
      await flaky.close();
    }
    const refusing = await startFlakyServer((_request, response) =>
      json(response, 409, { error: { code: "conflict", message: "no" } }),
    );
    try {
      const client = new MemoryClient({ baseUrl: refusing.url, allowPrivateNetwork: true, retryBaseMs: 5 });
      await assert.rejects(
        client.getMemory("x"),
        (error: MemoryError) => error.code === "conflict" && !error.retryable,
      );
      assert.equal(refusing.requests.length, 1);
    } finally {
      await refusing.close();
    }
  });

  it("waits a jittered backoff between retries: a random part of a doubling ceiling, capped at 5 s", async (context) => {
    const flaky = await startFlakyServer((_request, response, index) =>
      index < 4
        ? json(response, 503, { error: { code: "unavailable", message: "busy" } })
        : json(response, 200, { ok: true }),
    );
    // Record every wait the client asks for; the transport's own timer is the one at timeoutMs.
    const timeoutMs = 9_999;
    const realSetTimeout = globalThis.setTimeout;
    const waits: number[] = [];
    context.mock.method(globalThis, "setTimeout", ((
      callback: () => void,
      delay?: number,
      ...rest: unknown[]
    ) => {
      if (delay !== timeoutMs) waits.push(delay ?? 0);
      return realSetTimeout(callback, delay, ...rest);
    }) as typeof setTimeout);
    const backoffs = async (retryBaseMs: number, random: () => number) => {
      const randomMock = context.mock.method(Math, "random", random);
      waits.length = 0;
      flaky.requests.length = 0;
      try {
        const client = new MemoryClient({
          baseUrl: flaky.url,
          allowPrivateNetwork: true,
          retryBaseMs,
          maxRetries: 4,
          timeoutMs,
        });
        assert.deepEqual(await client.status(), { ok: true });
        assert.equal(flaky.requests.length, 5);
        return [...waits];
      } finally {
        randomMock.mock.restore();
      }
    };
    try {
      // Real randomness: every wait is within its ceiling (10, 20, 40, 80 ms), and they are not one
      // fixed fraction of it.
      const ceilings = [10, 20, 40, 80];
      const real = await backoffs(10, Math.random.bind(Math));
      assert.equal(real.length, 4, `one wait per retry: ${real}`);
      for (const [index, wait] of real.entries()) {
        assert.ok(
          wait >= 0 && wait < ceilings[index]!,
          `wait ${index} = ${wait} within [0, ${ceilings[index]})`,
        );
      }
      assert.ok(new Set(real.map((wait, index) => wait / ceilings[index]!)).size > 1, `jittered: ${real}`);
      // Scripted randomness: each wait is exactly that random part of its ceiling, so waits differ
      // across retries even where the ceiling doubles.
      const script = [0.75, 0.25, 0.5, 0];
      let draw = 0;
      assert.deepEqual(await backoffs(10, () => script[draw++ % script.length]!), [7.5, 5, 20, 0]);
      // The ceiling stops doubling at 5 s (3 s, then 5 s, not 6, 12 and 24 s).
      assert.deepEqual(await backoffs(3000, () => 0.001), [3, 5, 5, 5]);
    } finally {
      await flaky.close();
    }
  });
});

describe("MemoryClient retries: giving up, timeouts and refused connections", () => {
  it("gives up after maxRetries with the service's coded error", async () => {
    const failing = await startFlakyServer((_request, response) =>
      json(response, 500, { error: { code: "internal", message: "boom" } }),
    );
    try {
      const client = new MemoryClient({
        baseUrl: failing.url,
        allowPrivateNetwork: true,
        retryBaseMs: 1,
        maxRetries: 2,
      });
      await assert.rejects(
        client.status(),
        (error: MemoryError) => error.code === "internal" && error.status === 500,
      );
      assert.equal(failing.requests.length, 3);
    } finally {
      await failing.close();
    }
  });

  it("times out a silent service, retrying first", async () => {
    const silent = await startFlakyServer(() => {
      // Never answers.
    });
    try {
      const client = new MemoryClient({
        baseUrl: silent.url,
        allowPrivateNetwork: true,
        timeoutMs: 100,
        maxRetries: 1,
        retryBaseMs: 1,
      });
      await assert.rejects(client.status(), (error: unknown) => MemoryTimeoutError.isInstance(error));
      assert.equal(silent.requests.length, 2);
    } finally {
      await silent.close();
    }
  });

  it("reports a refused connection as a network error", async () => {
    const port = await freePort();
    const client = new MemoryClient({
      baseUrl: `http://127.0.0.1:${port}`,
      allowPrivateNetwork: true,
      maxRetries: 0,
    });
    await assert.rejects(client.status(), (error: unknown) => MemoryNetworkError.isInstance(error));
  });
});
