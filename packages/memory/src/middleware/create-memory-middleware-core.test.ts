import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { WriteEventRequest } from "../schemas/event.ts";
import type { ContextBundleRequest, ContextBundleResponse } from "../schemas/synthesis.ts";
import { DEFAULT_CACHE_ENTRIES, DEFAULT_CACHE_TTL_MS } from "./cache/bundle-cache.ts";
import { cacheIdentityKey } from "./cache/cache-identity.ts";
import {
  createMemoryMiddlewareCore,
  type MemoryMiddlewareCoreOptions,
} from "./create-memory-middleware-core.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";
import { MemoryMiddlewareError } from "./memory-middleware-error.ts";
import type { TurnMessage } from "./turn-message.ts";

/** Records what the core asks the service; the integration tests run the real service. */
function recordingClient(options: { fail?: boolean } = {}) {
  const bundleRequests: ContextBundleRequest[] = [];
  const events: WriteEventRequest[] = [];
  const client: MemoryMiddlewareClient = {
    async contextBundle(request) {
      bundleRequests.push(request);
      if (options.fail) throw new Error("service down");
      return bundleFor(`memory for ${request.userId ?? request.agentId ?? request.sessionId ?? "nobody"}`);
    },
    async writeEvent(request) {
      if (options.fail) throw new Error("service down");
      events.push(request);
      return {} as never;
    },
  };
  return { client, bundleRequests, events };
}

function bundleFor(content: string): ContextBundleResponse {
  return {
    profile: {
      summary: "",
      preferences: [],
      facts: [],
      procedures: [],
      memoryIds: [],
      generatedBy: "deterministic",
    },
    coreMemory: [],
    memories: [{ id: "mem_1", kind: "fact", content, score: 1, createdAt: "2026-11-29T00:00:00Z" }],
    recentEvents: [],
    tokenEstimate: 10,
    tokenBudget: 1200,
    truncated: false,
  };
}

const userAsks: TurnMessage[] = [{ role: "user", text: "what tea do I like?" }];

function core(client: MemoryMiddlewareClient, extra: Partial<MemoryMiddlewareCoreOptions> = {}) {
  return createMemoryMiddlewareCore({
    client,
    apiUrl: "http://127.0.0.1:1",
    apiKey: "key-1",
    onError: () => {},
    ...extra,
  });
}

describe("the middleware core: identity and scope", () => {
  it("resolves identity per request over the constructor's defaults, field by field", () => {
    const { client } = recordingClient();
    const middleware = core(client, { userId: "default-user", agentId: "agent-1" });
    assert.deepEqual(middleware.resolve({ userId: "alice", sessionId: undefined }), {
      userId: "alice",
      agentId: "agent-1",
    });
    assert.deepEqual(middleware.resolve(undefined), { userId: "default-user", agentId: "agent-1" });
  });

  it("a request identity parsed from JSON with an own __proto__ key sets no field and no prototype", async () => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client, { userId: "default-user" });
    const request = JSON.parse(
      '{"__proto__": {"userId": "mallory", "sessionId": "s-other", "scope": ["sessionId"]}, "agentId": "travel"}',
    );
    const identity = middleware.resolve(request);
    assert.equal(identity.sessionId, undefined, "no field is read through a prototype the request chose");
    assert.equal(Object.getPrototypeOf(identity), Object.prototype);
    assert.deepEqual({ ...identity }, { userId: "default-user", agentId: "travel" });
    await middleware.getContext(identity, userAsks);
    assert.deepEqual(
      [bundleRequests[0]!.userId, bundleRequests[0]!.agentId, bundleRequests[0]!.sessionId],
      ["default-user", "travel", undefined],
    );
  });

  it("asks in full mode with the user's query, and in wake-up mode without one", async () => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    await middleware.getContext({ userId: "alice" }, userAsks);
    await middleware.getContext({ userId: "alice" }, [{ role: "user", text: "  " }]);
    assert.equal(bundleRequests[0]!.query, "what tea do I like?");
    assert.equal(bundleRequests[1]!.query, undefined);
    await middleware.getContext({ userId: "carol" }, [{ role: "system", text: "You are terse." }]);
    assert.equal(bundleRequests.length, 3, "a prompt with no user message yet wakes up with memory");
    assert.equal(bundleRequests[2]!.query, undefined);
  });

  it("retrieves the user's memories from every session unless the scope says otherwise", async () => {
    const { client, bundleRequests } = recordingClient();
    await core(client).getContext({ userId: "alice", sessionId: "s1" }, userAsks);
    await core(client).getContext({ sessionId: "s1" }, userAsks);
    await core(client).getContext(
      { userId: "alice", sessionId: "s1", scope: ["userId", "sessionId"] },
      userAsks,
    );
    assert.deepEqual(
      bundleRequests.map((request) => [request.userId, request.sessionId]),
      [
        ["alice", undefined],
        [undefined, "s1"],
        ["alice", "s1"],
      ],
    );
  });

  it("restricts retrieval to the requested scope fields", async () => {
    const { client, bundleRequests } = recordingClient();
    await core(client).getContext({ userId: "alice", sessionId: "s1", scope: ["userId"] }, userAsks);
    assert.equal(bundleRequests[0]!.userId, "alice");
    assert.equal(bundleRequests[0]!.sessionId, undefined);
  });

  it("serves a repeated identity from the cache and keeps tenants apart", async () => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    const first = await middleware.getContext({ userId: "alice" }, userAsks);
    const again = await middleware.getContext({ userId: "alice" }, userAsks);
    const bob = await middleware.getContext({ userId: "bob" }, userAsks);
    assert.equal(bundleRequests.length, 2);
    assert.match(again!.text, /memory for alice/);
    assert.notEqual(first!.nonce, again!.nonce, "a cached bundle still gets a fresh nonce");
    assert.match(bob!.text, /memory for bob/);
    assert.doesNotMatch(bob!.text, /alice/);
  });
});

describe("the middleware core: the bundle cache", () => {
  it("keys the cache on every identity field, the API key only through its hash", async () => {
    const base = {
      agentId: "a",
      apiUrl: "http://x",
      apiKeyHash: "h1",
      mode: "full" as const,
      scope: ["userId"],
      sessionId: "s",
      userId: "u",
      query: "q",
    };
    const key = await cacheIdentityKey(base);
    assert.match(key!, /^[0-9a-f]{64}$/);
    for (const change of [
      { agentId: "b" },
      { apiUrl: "http://y" },
      { apiKeyHash: "h2" },
      { mode: "wake-up" as const },
      { scope: [] },
      { sessionId: "t" },
      { userId: "v" },
      { query: "r" },
    ]) {
      assert.notEqual(await cacheIdentityKey({ ...base, ...change }), key, JSON.stringify(change));
    }
    const { client, bundleRequests } = recordingClient();
    await core(client, { apiKey: "key-1" }).getContext({ userId: "alice" }, userAsks);
    const otherKey = core(client, { apiKey: "key-2" });
    await otherKey.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 2);
  });

  it("without an identity reads nothing: the tenant is never read for a call that names no one", async () => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    assert.equal(await middleware.getContext({}, userAsks), undefined);
    assert.equal(await middleware.getContext({ userId: "alice", scope: ["agentId"] }, userAsks), undefined);
    assert.equal(bundleRequests.length, 0);
    assert.notEqual(await middleware.getContext({ userId: "alice" }, userAsks), undefined);
    assert.equal(bundleRequests.length, 1);
  });

  it("bypasses the cache when WebCrypto is missing, and still injects", async (context) => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    const original = Object.getOwnPropertyDescriptor(globalThis, "crypto")!;
    Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true });
    context.after(() => Object.defineProperty(globalThis, "crypto", original));
    const withoutCrypto = [
      await middleware.getContext({ userId: "alice" }, userAsks),
      await middleware.getContext({ userId: "alice" }, userAsks),
    ];
    Object.defineProperty(globalThis, "crypto", original);
    assert.equal(bundleRequests.length, 2, "every call fetched");
    for (const envelope of withoutCrypto) assert.match(envelope!.text, /memory for alice/);
    await middleware.getContext({ userId: "alice" }, userAsks);
    await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 3, "with WebCrypto back, the cache serves the repeat");
  });

  it("holds the 50 most recently used identities by default", async () => {
    assert.equal(DEFAULT_CACHE_ENTRIES, 50);
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    for (let index = 0; index <= 50; index++)
      await middleware.getContext({ userId: `user-${index}` }, userAsks);
    assert.equal(bundleRequests.length, 51);
    // user-0 was the least recently used of 51: evicted. The other 50 are all still served.
    for (let index = 50; index >= 1; index--)
      await middleware.getContext({ userId: `user-${index}` }, userAsks);
    assert.equal(bundleRequests.length, 51, "all 50 most recent identities are still cached");
    await middleware.getContext({ userId: "user-0" }, userAsks);
    assert.equal(bundleRequests.length, 52, "the least recently used entry was evicted");
    assert.equal(bundleRequests.at(-1)!.userId, "user-0");
    // Fetching user-0 again pushed out the now least recently used, user-50.
    await middleware.getContext({ userId: "user-1" }, userAsks);
    assert.equal(bundleRequests.length, 52);
    await middleware.getContext({ userId: "user-50" }, userAsks);
    assert.equal(bundleRequests.length, 53);
  });

  it("serves a bundle for 60 seconds by default, counted from the fetch", async () => {
    assert.equal(DEFAULT_CACHE_TTL_MS, 60_000);
    let clock = 1_000;
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client, { cache: { now: () => clock } });
    await middleware.getContext({ userId: "alice" }, userAsks);
    clock += 59_999;
    await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 1, "still fresh a millisecond before the limit");
    clock += 1;
    const refreshed = await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 2, "an expired entry is fetched again, even after a hit");
    assert.match(refreshed!.text, /memory for alice/);
    await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 2, "the refetched bundle is cached again");
  });

  it("honours a shorter time limit", async () => {
    let clock = 0;
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client, { cache: { ttlMs: 40, now: () => clock } });
    await middleware.getContext({ userId: "alice" }, userAsks);
    clock = 39;
    await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 1);
    clock = 40;
    await middleware.getContext({ userId: "alice" }, userAsks);
    assert.equal(bundleRequests.length, 2);
  });
});

describe("the middleware core: tool loops, capture and failures", () => {
  it("in a tool loop, fetches only when the last message is the user's", async () => {
    const { client, bundleRequests } = recordingClient();
    const middleware = core(client);
    const loop: TurnMessage[] = [...userAsks, { role: "assistant", text: "" }, { role: "tool", text: "{}" }];
    assert.equal(await middleware.getContext({ userId: "alice" }, loop), undefined);
    assert.equal(bundleRequests.length, 0);
    await middleware.getContext({ userId: "alice" }, userAsks);
    const step = await middleware.getContext({ userId: "alice" }, loop);
    assert.equal(bundleRequests.length, 1);
    assert.match(step!.text, /memory for alice/, "the step reuses the turn's bundle");
  });

  it("captures a turn with idempotency keys that depend on the turn, never on the clock", async () => {
    const { client, events } = recordingClient();
    const middleware = core(client, { awaitCapture: true });
    await middleware.captureTurn({ userId: "alice", sessionId: "s1" }, userAsks, "green tea");
    await new Promise((resolve) => setTimeout(resolve, 5));
    await middleware.captureTurn({ userId: "alice", sessionId: "s1" }, userAsks, "green tea");
    await middleware.captureTurn(
      { userId: "alice", sessionId: "s1" },
      [{ role: "user", text: "hi" }, ...userAsks],
      "green tea",
    );
    await middleware.captureTurn({ userId: "bob", sessionId: "s1" }, userAsks, "green tea");
    assert.deepEqual(
      events.slice(0, 2).map((event) => [event.role, event.content, event.userId, event.sessionId]),
      [
        ["user", "what tea do I like?", "alice", "s1"],
        ["assistant", "green tea", "alice", "s1"],
      ],
    );
    assert.match(events[0]!.customId!, /^[0-9a-f]{64}:user$/);
    assert.equal(events[2]!.customId, events[0]!.customId, "a retry carries the same key");
    assert.notEqual(events[4]!.customId, events[0]!.customId, "a different history is a different turn");
    assert.notEqual(events[6]!.customId, events[0]!.customId, "another tenant is a different turn");
  });

  it("degrades on failure: injects nothing, drops the capture, reports through onError", async () => {
    const { client } = recordingClient({ fail: true });
    const reported: MemoryMiddlewareError[] = [];
    const middleware = core(client, { onError: (error) => reported.push(error), awaitCapture: true });
    assert.equal(await middleware.getContext({ userId: "alice" }, userAsks), undefined);
    await middleware.captureTurn({ userId: "alice" }, userAsks, "answer");
    assert.deepEqual(
      reported.map((error) => [
        error.code,
        (error.data as { phase: string }).phase,
        MemoryMiddlewareError.isInstance(error),
      ]),
      [
        ["memory_context_failed", "inject", true],
        ["memory_capture_failed", "capture", true],
      ],
    );
    assert.equal((reported[0]!.cause as Error).message, "service down");
  });

  it("without onError, every failure is still a log line (not only the first)", async (context) => {
    const warn = context.mock.method(console, "warn", () => {});
    const { client } = recordingClient({ fail: true });
    const first = createMemoryMiddlewareCore({ client, apiUrl: "http://x" });
    const second = createMemoryMiddlewareCore({ client, apiUrl: "http://x" });
    await first.getContext({ userId: "a" }, userAsks);
    await first.getContext({ userId: "b" }, userAsks);
    await first.captureTurn({ userId: "a" }, userAsks, "x");
    await first.flush();
    assert.equal(warn.mock.callCount(), 3);
    await second.getContext({ userId: "a" }, userAsks);
    assert.equal(warn.mock.callCount(), 4);
    assert.match(String(warn.mock.calls[0]!.arguments[0]), /memory context unavailable/);
  });
});
