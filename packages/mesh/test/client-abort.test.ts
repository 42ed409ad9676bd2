/**
 * Every mesh client entry point honours its abort signal against a module that never answers (a NATS
 * subscriber that takes every request and replies to none): a signal aborted before the call gives
 * `aborted` at once and publishes nothing; one aborted mid-wait gives `aborted` within a moment, and a
 * call's node is told to cancel it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ToolAbortedError } from "@tackle/core";
import {
  createMeshClient,
  issueMembership,
  listMemberships,
  type MeshClient,
  openMeshBuckets,
  readCatalogue,
  revokeMembership,
} from "@tackle/mesh";
import { type NatsServerHandle, promptlyMs, startNatsServer, startSilentServer } from "@tackle/test-support";

type Entry = readonly [string, (client: MeshClient, signal: AbortSignal) => Promise<unknown>];

const entryPoints: readonly Entry[] = [
  ["call", (client, signal) => client.call("silent.echo", { text: "hi" }, { signal })],
  ["callSeat", (client, signal) => client.callSeat("ledger", "append", { line: "one" }, { signal })],
  ["tools", (client, signal) => client.tools("silent", { signal })],
  ["catalogue", (client, signal) => client.catalogue({ signal })],
];

/** The error a call gave, as data (`call`, `callSeat`) or thrown (the listings). */
async function failureOf(pending: Promise<unknown>): Promise<unknown> {
  try {
    const result = (await pending) as { ok?: boolean; error?: unknown };
    return result.ok === false ? result.error : new Error(`it answered: ${JSON.stringify(result)}`);
  } catch (error) {
    return error;
  }
}

function assertAborted(error: unknown): void {
  assert.ok(ToolAbortedError.isInstance(error), `expected an aborted error, got ${String(error)}`);
  assert.equal(error.code, "aborted");
}

describe("mesh client against a module that never answers", () => {
  let nats: NatsServerHandle;
  let silent: NatsConnection;
  let client: MeshClient;
  /** Every subject published on the broker, as the silent module's connection sees it. */
  const published: string[] = [];

  before(async () => {
    nats = await startNatsServer();
    silent = await connect({ servers: nats.url });
    silent.subscribe(">", {
      callback: (_, message) => {
        published.push(message.subject);
      },
    });
    await silent.flush();
    client = await createMeshClient({ servers: nats.url, nodeWatch: false });
    await issueMembership(client.connection, { node: "n1", module: "silent", seats: ["ledger"] });
    // The client learns the module's prefix once, as any caller would.
    await client.catalogue();
  });
  after(async () => {
    await client.close();
    await silent.close();
    await nats.stop();
  });

  for (const [name, call] of entryPoints) {
    it(`${name}: a signal aborted before the call gives aborted at once and publishes nothing`, async () => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const before = published.length;
      const started = performance.now();
      assertAborted(await failureOf(call(client, AbortSignal.abort())));
      assert.ok(performance.now() - started < promptlyMs, "at once");
      await silent.flush();
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(published.slice(before), [], "nothing was published");
    });

    it(`${name}: a signal aborted mid-wait gives aborted within a moment`, async () => {
      const controller = new AbortController();
      const pending = failureOf(call(client, controller.signal));
      // Long enough for the request to be out and waiting on the silent module.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const aborted = performance.now();
      controller.abort();
      assertAborted(await pending);
      const elapsed = performance.now() - aborted;
      assert.ok(elapsed < promptlyMs, `${Math.round(elapsed)} ms after the abort`);
    });
  }

  it("a call aborted before it, to a module the client has not met, does not read the catalogue", async () => {
    const fresh = await createMeshClient({ servers: nats.url, nodeWatch: false });
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const before = published.length;
      const result = await fresh.call("silent.echo", {}, { signal: AbortSignal.abort() });
      assert.equal(result.ok, false);
      assertAborted(result.ok ? undefined : result.error);
      await silent.flush();
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(published.slice(before), [], "nothing was published");
    } finally {
      await fresh.close();
    }
  });

  it("a call aborted mid-wait asks its module to cancel it", async () => {
    const controller = new AbortController();
    const pending = client.call("silent.echo", {}, { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = published.length;
    controller.abort();
    assert.equal((await pending).ok, false);
    await silent.flush();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(published.slice(before).includes("tackle.tools.silent.tools.cancel"), "cancel published");
  });
});

describe("createMeshClient against a broker that accepts and never answers", () => {
  it("a signal aborted before connecting rejects at once and opens no connection", async () => {
    const silent = await startSilentServer();
    try {
      const at = performance.now();
      await assert.rejects(
        createMeshClient({ servers: `nats://127.0.0.1:${silent.port}`, signal: AbortSignal.abort() }),
        (error: unknown) => {
          assertAborted(error);
          return true;
        },
      );
      assert.ok(performance.now() - at < promptlyMs, "at once");
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(silent.accepted, 0, "no connection was opened");
    } finally {
      await silent.close();
    }
  });

  it("a signal aborted while connecting rejects within a moment", async () => {
    const silent = await startSilentServer();
    try {
      const controller = new AbortController();
      const connecting = createMeshClient({
        servers: `nats://127.0.0.1:${silent.port}`,
        signal: controller.signal,
        connectTimeoutMs: 10_000,
      });
      connecting.catch(() => undefined);
      assert.ok(await silent.waitForConnection(1), "the client reached the broker");
      const at = performance.now();
      controller.abort();
      await assert.rejects(connecting, (error: unknown) => {
        assertAborted(error);
        return true;
      });
      assert.ok(
        performance.now() - at < promptlyMs,
        `${Math.round(performance.now() - at)} ms after the abort`,
      );
    } finally {
      await silent.close();
    }
  });

  it("connectTimeoutMs bounds the wait for a broker that never answers", async () => {
    const silent = await startSilentServer();
    try {
      const at = performance.now();
      await assert.rejects(
        createMeshClient({ servers: `nats://127.0.0.1:${silent.port}`, connectTimeoutMs: 300 }),
      );
      const took = performance.now() - at;
      assert.ok(took >= 250 && took < 2000, `gave up after ${Math.round(took)} ms`);
      // Not asserted: nats.js leaves the socket of a handshake that timed out open (the broker's to close).
    } finally {
      await silent.close();
    }
  });
});

describe("membership functions against a JetStream that never answers", () => {
  let nats: NatsServerHandle;
  let silent: NatsConnection;
  let admin: NatsConnection;
  const published: string[] = [];

  before(async () => {
    // No JetStream on the server: a subscriber takes its API requests and answers none.
    nats = await startNatsServer({ jetstream: false });
    silent = await connect({ servers: nats.url });
    silent.subscribe(">", {
      callback: (_, message) => {
        published.push(message.subject);
      },
    });
    await silent.flush();
    admin = await connect({ servers: nats.url });
  });
  after(async () => {
    await admin.close();
    await silent.close();
    await nats.stop();
  });

  const all: Entry2[] = [
    ["openMeshBuckets", (signal) => openMeshBuckets(admin, { signal })],
    ["issueMembership", (signal) => issueMembership(admin, { node: "n1", module: "m", signal })],
    ["revokeMembership", (signal) => revokeMembership(admin, { node: "n1", module: "m", signal })],
    ["listMemberships", (signal) => listMemberships(admin, {}, { signal })],
    ["readCatalogue", (signal) => readCatalogue(admin, { signal })],
  ];
  for (const [name, call] of all) {
    it(`${name}: a signal aborted before the call rejects at once and publishes nothing`, async () => {
      const before = published.length;
      await assert.rejects(call(AbortSignal.abort()), (error: unknown) => {
        assertAborted(error);
        return true;
      });
      await silent.flush();
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(published.slice(before), [], "nothing was published");
    });
  }
  for (const [name, call] of all.slice(3)) {
    it(`${name}: a signal aborted mid-wait rejects within a moment`, async () => {
      const before = published.length;
      const controller = new AbortController();
      const pending = call(controller.signal);
      pending.catch(() => undefined);
      const deadline = Date.now() + 2000;
      while (published.length === before && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      assert.ok(published.length > before, "the read asked JetStream");
      const at = performance.now();
      controller.abort();
      await assert.rejects(pending, (error: unknown) => {
        assertAborted(error);
        return true;
      });
      const elapsed = performance.now() - at;
      assert.ok(elapsed < promptlyMs, `${Math.round(elapsed)} ms after the abort`);
    });
  }
});

type Entry2 = readonly [string, (signal: AbortSignal) => Promise<unknown>];
