/** The HTTP API and `MemoryClient` together over real HTTP: auth, validation, OpenAPI, retries, guards. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  createSqliteStore,
  DEFAULT_MEMORY_URL,
  MemoryClient,
  MemoryError,
  SsrfRefusedError,
} from "@tackle/memory";
import { DEFAULT_MEMORY_PORT, type MemoryServer, memoryRoutes, serveMemory } from "@tackle/memory/server";
import { json, startFlakyServer } from "./support/start-flaky-server.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-http-"));
let server: MemoryServer;
let alice: MemoryClient;
let bob: MemoryClient;

before(async () => {
  server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { "key-alice": "tenant-alice", "key-bob": "tenant-bob" },
    port: 0,
  });
  alice = new MemoryClient({ baseUrl: server.url, apiKey: "key-alice", allowPrivateNetwork: true });
  bob = new MemoryClient({ baseUrl: server.url, apiKey: "key-bob", allowPrivateNetwork: true });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("HTTP API: keys and tenants", () => {
  it("answers 401 without a valid key, as a typed error", async () => {
    for (const apiKey of [undefined, "wrong"]) {
      const client = new MemoryClient({
        baseUrl: server.url,
        allowPrivateNetwork: true,
        ...(apiKey ? { apiKey } : {}),
      });
      await assert.rejects(client.status(), (error: unknown) => {
        assert.ok(MemoryError.isInstance(error));
        assert.equal(error.status, 401);
        assert.equal(error.code, "unauthorized");
        return true;
      });
    }
  });

  it("tenants come from the API key: one tenant never sees or touches the other's memories", async () => {
    const { memory } = await alice.add({
      userId: "shared-user",
      content: "Alice's secret launch date is May 5",
    });
    assert.equal(
      (await bob.search({ userId: "shared-user", query: "secret launch date" })).results.length,
      0,
    );
    await assert.rejects(bob.getMemory(memory.id), (error: MemoryError) => error.status === 404);
    await assert.rejects(bob.deleteMemory(memory.id), (error: MemoryError) => error.code === "not_found");
    assert.equal((await alice.getMemory(memory.id)).memory.status, "active");
    // Inside one tenant, a scope narrows operations by id as well.
    await assert.rejects(
      alice.getMemory(memory.id, { scope: { userId: "someone-else" } }),
      (error: MemoryError) => {
        return error.code === "not_found" && error.status === 404;
      },
    );
    await assert.rejects(
      alice.deleteMemory(memory.id, { reason: "x" }, { scope: { userId: "someone-else" } }),
      (error: MemoryError) => error.code === "not_found",
    );
    assert.equal(
      (await alice.getMemory(memory.id, { scope: { userId: "shared-user" } })).memory.status,
      "active",
    );
  });
});

describe("HTTP API: input", () => {
  it("bad input is answered 400 with the issues, and nothing is stored", async () => {
    const before = (await alice.status()).counts;
    const bodies = [
      '{"content": 42}',
      "{not json",
      JSON.stringify({ role: "user", content: "x", customId: "" }),
    ];
    for (const [index, body] of bodies.entries()) {
      const path = index === 2 ? "/v1/events" : "/v1/memories";
      const response = await fetch(server.url + path, {
        method: "POST",
        headers: { authorization: "Bearer key-alice", "content-type": "application/json" },
        body,
      });
      assert.equal(response.status, 400, body);
      const answer = (await response.json()) as { error: { code: string; data?: { issues?: unknown[] } } };
      assert.equal(answer.error.code, "invalid_input");
      if (index !== 1) assert.ok((answer.error.data?.issues?.length ?? 0) > 0);
    }
    // The client checks the same schemas before sending anything.
    await assert.rejects(alice.add({ content: "" }), (error: MemoryError) => error.code === "invalid_input");
    assert.deepEqual((await alice.status()).counts, before);
  });

  it("metadata a caller sends is bounded: a refused key, nesting, width and size each answer 400", async () => {
    const before = (await alice.status()).counts;
    let deep = '"leaf"';
    for (let level = 0; level < 10_000; level += 1) deep = `{"a":${deep}}`;
    const wide = JSON.stringify(
      Object.fromEntries(Array.from({ length: 50_000 }, (_, index) => [`k${index}`, 1])),
    );
    const cases: [string, string, RegExp][] = [
      ["/v1/memories", '{"speaker":"Maya","__proto__":{"admin":true}}', /"__proto__"/],
      ["/v1/memories", deep, /at most 8 levels/],
      ["/v1/memories", wide, /at most 1000 keys/],
      ["/v1/events", JSON.stringify({ note: "x".repeat(20_000) }), /at most 16384 bytes/],
      [
        "/v1/knowledge/documents",
        JSON.stringify({ tags: Array.from({ length: 3_000 }, () => "t") }),
        /at most 1000 keys/,
      ],
    ];
    for (const [path, metadata, message] of cases) {
      const started = performance.now();
      const body =
        path === "/v1/events"
          ? `{"userId":"u","role":"user","content":"hi","metadata":${metadata}}`
          : path === "/v1/knowledge/documents"
            ? `{"userId":"u","title":"t","content":"hello","metadata":${metadata}}`
            : `{"userId":"u","content":"A note","metadata":${metadata}}`;
      const response = await fetch(server.url + path, {
        method: "POST",
        headers: { authorization: "Bearer key-alice", "content-type": "application/json" },
        body,
      });
      const answer = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(response.status, 400, `${path} ${metadata.slice(0, 60)}`);
      assert.equal(answer.error.code, "invalid_input");
      assert.match(answer.error.message, message);
      assert.ok(performance.now() - started < 2_000, "refused without a long computation");
    }
    // Keys that only look like Object's own members are ordinary keys, kept as sent.
    const kept = await alice.add({
      userId: "u",
      content: "Metadata with inherited names",
      metadata: JSON.parse('{"constructor":{"prototype":1},"toString":"x","hasOwnProperty":2}'),
    });
    assert.deepEqual(
      (await alice.status()).counts,
      { ...before, memories: before.memories + 1 },
      "only the last memory was stored",
    );
    assert.deepEqual((await alice.getMemory(kept.memory.id)).memory.metadata, {
      constructor: { prototype: 1 },
      toString: "x",
      hasOwnProperty: 2,
    });
  });
});

describe("HTTP API: kept-alive connections and OpenAPI", () => {
  it("answers on a kept-alive connection after the event loop was held past Node's 5 s keep-alive", async () => {
    // Client and server share this process: a hold of the loop (a large import, a busy machine)
    // holds both. The client's next request goes out on its pooled connection, and Node ran the
    // server's overdue idle timer before reading it: the socket was destroyed under it, ECONNRESET.
    const add = async (content: string) => {
      const response = await fetch(`${server.url}/v1/memories`, {
        method: "POST",
        headers: { authorization: "Bearer key-alice", "content-type": "application/json" },
        body: JSON.stringify({ userId: "kept-alive", content }),
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as { memory: { content: string } }).memory.content;
    };
    assert.equal(await add("before the hold"), "before the hold");
    // 7 s asleep (no CPU burnt): past the 5 s keep-alive and the 1 s Node adds to its timer.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 7000);
    assert.equal(await add("after the hold"), "after the hold");
  });

  it("serves an OpenAPI 3.1 document whose operations are the client's methods", async () => {
    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, { operationId: string; requestBody?: unknown }>>;
    };
    assert.equal(document.openapi, "3.1.0");
    const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods));
    assert.equal(operations.length, memoryRoutes.length);
    for (const operation of operations) {
      assert.equal(typeof (alice as unknown as Record<string, unknown>)[operation.operationId], "function");
    }
    const search = document.paths["/v1/memories/search"]?.post;
    assert.ok(JSON.stringify(search?.requestBody).includes("query"));
    // Writes document the Idempotency-Key header they are done once by; reads do not take one.
    for (const route of memoryRoutes) {
      const operation = document.paths[route.path]?.[route.method] as {
        parameters?: { in: string; name: string }[];
      };
      const keyed = (operation.parameters ?? []).some(
        (parameter) => parameter.in === "header" && parameter.name === "idempotency-key",
      );
      assert.equal(keyed, route.write === true, route.operationId);
    }
  });
});

describe("HTTP API: client routes and retried writes", () => {
  it("every client method reaches its route", async () => {
    const { memory } = await alice.add({
      userId: "u",
      kind: "procedure",
      content: "Restart the worker with make restart",
    });
    await alice.writeEvent({ userId: "u", sessionId: "s", role: "user", content: "I prefer short answers." });
    await alice.updateMemory(memory.id, { importance: 0.9 });
    await alice.recordFeedback(memory.id, { rating: "helpful" });
    assert.equal((await alice.recordProcedureOutcome(memory.id, { success: true })).successRate, 1);
    assert.equal((await alice.memoryHistory(memory.id)).versions.length, 4);
    assert.equal((await alice.chainTrace(memory.id)).memory.id, memory.id);
    assert.equal((await alice.recallConversation({ sessionId: "s" })).events.length, 1);
    await alice.ingestDocument({ title: "Runbook", content: "Restart the worker when the queue stalls." });
    assert.equal(
      (await alice.searchKnowledge({ wholeTenant: true, query: "queue stalls" })).results.length,
      1,
    );
    assert.equal(
      (await alice.selfEdit({ edits: [{ op: "append", label: "persona", text: "terse" }] })).blocks.length,
      2,
    );
    assert.ok((await alice.profile({ userId: "u" })).profile.preferences.includes("I prefer short answers."));
    assert.ok((await alice.contextBundle({ userId: "u", query: "restart worker" })).memories.length > 0);
    assert.ok((await alice.unifiedState({ userId: "u" })).counts.memories.active >= 2);
    assert.equal(
      (await alice.noveltyScan({ candidates: ["Restart the worker with make restart"] })).results[0]?.novel,
      false,
    );
    const consolidation = await alice.waitForJob((await alice.consolidate({ userId: "u" })).job.id);
    assert.equal(consolidation.status, "succeeded");
    const imported = await alice.importConversations({
      format: "openai",
      conversations: [{ messages: [{ role: "user", content: "I am based in Kyoto." }] }],
    });
    assert.equal((await alice.waitForJob(imported.job.id)).status, "succeeded");
    assert.ok((await alice.listJobs({ type: "import" })).jobs.length >= 1);
    assert.equal((await alice.accessTrends({ days: 3 })).days.length, 3);
    assert.ok((await alice.accessSummaries({ limit: 3 })).top.length > 0);
    const traces = await alice.listTraces({ limit: 5 });
    assert.ok(traces.traces.length > 0);
    assert.equal((await alice.getTrace(traces.traces[0]!.id)).trace.id, traces.traces[0]!.id);
    assert.equal((await alice.deleteMemory(memory.id, { reason: "done" })).memory.status, "deleted");
  });

  it("concurrent event writes retried after lost answers store one event", async () => {
    // A proxy that forwards every request but loses the first answer to each distinct body (503).
    const seen = new Set<string>();
    const proxy = await startFlakyServer(async (request, response) => {
      const upstream = await fetch(server.url + request.path, {
        method: request.method,
        headers: { authorization: String(request.headers.authorization), "content-type": "application/json" },
        ...(request.method === "GET" ? {} : { body: request.body }),
      });
      const text = await upstream.text();
      const key = `${request.path}:${request.body}`;
      if (!seen.has(key)) {
        seen.add(key);
        return json(response, 503, { error: { code: "unavailable", message: "lost", retryable: true } });
      }
      response.writeHead(upstream.status, { "content-type": "application/json" });
      response.end(text);
    });
    try {
      const client = new MemoryClient({
        baseUrl: proxy.url,
        apiKey: "key-alice",
        allowPrivateNetwork: true,
        retryBaseMs: 5,
      });
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          client.writeEvent({
            sessionId: "retry-session",
            role: "user",
            content: "I moved to Lisbon.",
            customId: "turn-42",
          }),
        ),
      );
      assert.equal(new Set(answers.map((answer) => answer.event.id)).size, 1);
      const recalled = await alice.recallConversation({ sessionId: "retry-session" });
      assert.equal(recalled.events.length, 1);
      // Without a custom id the client makes one, so its own retry does not duplicate either.
      await client.writeEvent({ sessionId: "retry-session-2", role: "user", content: "hello", infer: false });
      assert.equal((await alice.recallConversation({ sessionId: "retry-session-2" })).events.length, 1);
      assert.ok(proxy.requests.length >= 8, "the proxy really lost answers and the client retried");
    } finally {
      await proxy.close();
    }
  });
});

describe("rate limit", () => {
  it("answers 429 with Retry-After over a tenant's rate, and the client's retry gets through", async () => {
    const limited = await serveMemory({
      store: join(directory, "limited.db"),
      apiKeys: { "key-a": "tenant-a", "key-b": "tenant-b" },
      port: 0,
      rateLimit: { requestsPerSecond: 2, burst: 2 },
    });
    try {
      const statuses = [];
      for (let index = 0; index < 3; index += 1) {
        const response = await fetch(`${limited.url}/v1/status`, {
          headers: { authorization: "Bearer key-a" },
        });
        statuses.push([response.status, response.headers.get("retry-after")]);
        await response.body?.cancel();
      }
      assert.deepEqual(statuses, [
        [200, null],
        [200, null],
        [429, "1"],
      ]);
      // Another tenant has its own bucket.
      const other = await fetch(`${limited.url}/v1/status`, { headers: { authorization: "Bearer key-b" } });
      assert.equal(other.status, 200);
      const client = new MemoryClient({ baseUrl: limited.url, apiKey: "key-a", allowPrivateNetwork: true });
      const started = Date.now();
      assert.equal((await client.status()).tenant, "tenant-a");
      assert.ok(Date.now() - started >= 300, "the client waited for Retry-After");
    } finally {
      await limited.close();
    }
  });
});

describe("MemoryClient", () => {
  it("SSRF guard: refuses other schemes and private, loopback and link-local hosts unless allowed", async () => {
    for (const baseUrl of [
      "file:///etc/passwd",
      "ftp://example.com",
      "http://127.0.0.1:4280",
      "http://localhost:4280",
      "http://169.254.169.254/latest",
      "http://10.1.2.3",
      "http://[::1]:4280",
      "http://[fe80::1]",
      "http://[::ffff:192.168.1.1]",
    ]) {
      assert.throws(
        () => new MemoryClient({ baseUrl }),
        (error: unknown) => SsrfRefusedError.isInstance(error),
        baseUrl,
      );
    }
    assert.throws(
      () => new MemoryClient({ baseUrl: "file:///x", allowPrivateNetwork: true }),
      (error: unknown) => SsrfRefusedError.isInstance(error),
    );
    // The local default reaches its own loopback service.
    const saved = process.env.TACKLE_MEMORY_URL;
    delete process.env.TACKLE_MEMORY_URL;
    try {
      assert.equal(new MemoryClient().baseUrl, "http://127.0.0.1:4280");
    } finally {
      if (saved !== undefined) process.env.TACKLE_MEMORY_URL = saved;
    }
    // A public address passes the guard (no connection is made here).
    assert.equal(new MemoryClient({ baseUrl: "https://93.184.216.34" }).baseUrl, "https://93.184.216.34");
  });

  it("SSRF guard: the local default client reaches its own loopback service; an explicit loopback URL does not", async (context) => {
    // What the guard allows: with neither `baseUrl` nor TACKLE_MEMORY_URL, the client talks to
    // DEFAULT_MEMORY_URL (127.0.0.1:4280) and the private network is allowed for it. Any URL the caller
    // names — even the very same loopback address — is refused unless `allowPrivateNetwork` is set.
    const saved = process.env.TACKLE_MEMORY_URL;
    delete process.env.TACKLE_MEMORY_URL;
    context.after(() => {
      if (saved === undefined) delete process.env.TACKLE_MEMORY_URL;
      else process.env.TACKLE_MEMORY_URL = saved;
    });
    assert.equal(DEFAULT_MEMORY_URL, `http://127.0.0.1:${DEFAULT_MEMORY_PORT}`);

    const store = createSqliteStore({ path: join(directory, "default-port.db") });
    let local: MemoryServer | undefined;
    try {
      local = await serveMemory({ store, apiKeys: { "key-local": "tenant-local" } });
    } catch (error) {
      await store.close();
      if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE") throw error;
    }
    if (local) {
      try {
        assert.equal(local.url, DEFAULT_MEMORY_URL, "the service's default address is the client's default");
        const client = new MemoryClient({ apiKey: "key-local" });
        assert.equal(client.baseUrl, DEFAULT_MEMORY_URL);
        const status = await client.status();
        assert.equal(status.tenant, "tenant-local", "a real request went through the guard to loopback");
      } finally {
        await local.close();
      }
    } else {
      // Someone else holds 127.0.0.1:4280 here: the request still goes out (whatever answers, the
      // guard did not refuse it).
      const outcome = await new MemoryClient({ apiKey: "key-local", maxRetries: 0, timeoutMs: 2000 })
        .status()
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.ok(!SsrfRefusedError.isInstance(outcome), `the default client was refused: ${outcome}`);
    }

    // The same loopback service on another port, named explicitly, is refused before connecting,
    // whether named by option or by environment, and reached only with allowPrivateNetwork.
    const explicit = [server.url, DEFAULT_MEMORY_URL, `http://localhost:${server.port}`];
    for (const baseUrl of explicit) {
      assert.throws(
        () => new MemoryClient({ baseUrl, apiKey: "key-alice" }),
        (error: unknown) => SsrfRefusedError.isInstance(error),
        baseUrl,
      );
      process.env.TACKLE_MEMORY_URL = baseUrl;
      assert.throws(
        () => new MemoryClient({ apiKey: "key-alice" }),
        (error: unknown) => SsrfRefusedError.isInstance(error),
        `TACKLE_MEMORY_URL=${baseUrl}`,
      );
      delete process.env.TACKLE_MEMORY_URL;
    }
    const allowed = new MemoryClient({ baseUrl: server.url, apiKey: "key-alice", allowPrivateNetwork: true });
    assert.equal((await allowed.status()).tenant, "tenant-alice");
  });
});
