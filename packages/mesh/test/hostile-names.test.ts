/**
 * A caller's permitted calls as attacks (ADR 0218), over a real nats-server: names that a plain object
 * inherits (`__proto__`, `constructor`, `toString`, …) as modules, tools, seats and error codes; names
 * with subject metacharacters or line breaks; arguments nested 100,000 deep or with 60,000 keys. Each
 * is answered with the tool it names or a typed error, never another tool's answer, a throw or a stall.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, issueMembership, type MeshClient, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
let runtime: Awaited<ReturnType<typeof startNodeRuntime>>;
let client: MeshClient;
let raw: NatsConnection;
const logger = recordingLogger();

before(async () => {
  nats = await startNatsServer();
  const bundle = fixture("inherited-names.mjs");
  runtime = await startNodeRuntime({
    config: meshConfig("hostile-1", nats.url, [
      { module: "names", path: bundle },
      { module: "__proto__", path: bundle },
    ]),
    logger,
  });
  client = await createMeshClient({ servers: nats.url, timeoutMs: 5000 });
  raw = await connect({ servers: nats.url });
});
after(async () => {
  await raw?.close();
  await client?.close();
  await runtime?.close();
  await nats?.close();
});

/** The code of a failed call, or "ok". */
function outcome(result: Awaited<ReturnType<MeshClient["call"]>>): string {
  return result.ok ? "ok" : result.error.code;
}

describe("names a plain object inherits", () => {
  it("runs the tool a name names, and answers unknown_tool for an inherited name no tool has", async () => {
    for (const module of ["names", "__proto__"]) {
      for (const tool of ["constructor", "__proto__", "toString"]) {
        assert.deepEqual(await client.call(`${module}.${tool}`, {}), { ok: true, output: { tool } });
      }
      for (const tool of ["hasOwnProperty", "valueOf", "isPrototypeOf"]) {
        const result = await client.call(`${module}.${tool}`, {});
        assert.equal(outcome(result), "unknown_tool", `${module}.${tool}: ${JSON.stringify(result)}`);
      }
    }
    // Arguments with an own `__proto__` key are data: they neither satisfy a schema nor change one.
    const proto = await raw.request("tackle.tools.names.echo", '{"__proto__":{"text":"x"}}', {
      timeout: 5000,
    });
    assert.equal(proto.headers?.get("Tackle-Error-Code"), "invalid_input");
  });

  it("holds no seat named toString, constructor or __proto__ (it named a garbage subject)", async () => {
    await issueMembership(client.connection, { node: "hostile-1", module: "names", seats: ["pad"] });
    await issueMembership(client.connection, { node: "hostile-1", module: "__proto__" });
    await eventually("the seat's verb answering", async () => {
      const result = await client.callSeat("pad", "note", {});
      return result.ok ? result : undefined;
    });
    assert.deepEqual(await client.callSeat("pad", "note", {}), { ok: true, output: { tool: "pad.note" } });
    for (const seat of ["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"]) {
      const result = await client.callSeat(seat, "note", {});
      assert.equal(outcome(result), "unknown_seat", `${seat}: ${JSON.stringify(result)}`);
      assert.equal(!result.ok && result.error.retryable, false);
    }
  });

  it("answers a tool's error coded like an inherited name with status 500 in the standard header", async () => {
    for (const code of ["toString", "constructor", "__proto__"]) {
      const reply = await raw.request("tackle.tools.names.fail", JSON.stringify({ code }), { timeout: 5000 });
      assert.equal(reply.headers?.get("Nats-Service-Error-Code"), "500", code);
      assert.equal(reply.headers?.get("Tackle-Error-Code"), code);
      const result = await client.call("names.fail", { code });
      assert.equal(outcome(result), code);
    }
    // A code no header can hold reaches the caller whole in the body (it became tool_failed).
    const broken = await client.call("names.fail", { code: "a\r\nb" }, { idempotencyKey: "broken-code" });
    assert.equal(outcome(broken), "a\r\nb");
    const repeat = await client.call("names.fail", { code: "a\r\nb" }, { idempotencyKey: "broken-code" });
    assert.equal(outcome(repeat), "a\r\nb");
    assert.ok(!logger.lines.some((line) => /escaped its tool set/.test(line.message)));
  });
});

describe("names that are not tool names", () => {
  it("refuses a listing or control subject, a wildcard, a space or a line break as invalid_request, sending nothing", async () => {
    const names = [
      "names.tools", // answered the module's listing as the tool's output
      "names.tools.held", // answered a node's held calls as the tool's output
      "names.tools.cancel", // waited out the whole time limit
      "names.a b", // unavailable, retryable
      "names.echo\r\nPUB tackle.tools.names.fail 2",
      "names.*",
      "names.>",
      "names..echo",
      "names.echo.",
      "names.ëcho",
    ];
    for (const name of names) {
      const started = performance.now();
      const result = await client.call(name, { text: "x" }, { timeoutMs: 3000 });
      assert.equal(outcome(result), "invalid_request", `${JSON.stringify(name)}: ${JSON.stringify(result)}`);
      assert.equal(!result.ok && result.error.retryable, false);
      assert.ok(performance.now() - started < underLoadMs(500), `${JSON.stringify(name)} took its time`);
    }
    for (const [seat, verb] of [
      ["pad", "*"],
      ["pad", "note x"],
      ["pa d", "note"],
      ["pad.x", "note"],
      ["pad", ""],
    ] as const) {
      const result = await client.callSeat(seat, verb, {});
      assert.equal(outcome(result), "invalid_request", `${seat} ${verb}: ${JSON.stringify(result)}`);
    }
  });

  it("refuses a key or call id with a line break, and arguments JSON cannot write, as results (they threw)", async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const calls = [
      client.call("names.echo", { text: "a" }, { idempotencyKey: "a\nb" }),
      client.call("names.echo", { text: "a" }, { callId: "a\r\nb" }),
      client.callSeat("pad", "note", {}, { idempotencyKey: "\r" }),
      client.call("names.echo", { text: 1n }),
      client.call("names.echo", cyclic),
    ];
    for (const result of await Promise.all(calls)) {
      assert.equal(outcome(result), "invalid_request", JSON.stringify(result));
      assert.equal(!result.ok && result.error.retryable, false);
    }
  });

  it("refuses a key or call id over 1,024 characters as invalid_request naming the limit (it read as arguments too large)", async () => {
    const long = "k".repeat(1025);
    for (const options of [{ idempotencyKey: long }, { callId: long }]) {
      const result = await client.call("names.echo", { text: "a" }, options);
      assert.equal(outcome(result), "invalid_request", JSON.stringify(result));
      assert.match(!result.ok ? result.error.message : "", /1025 characters, over the 1024 allowed/);
    }
    const seat = await client.callSeat("pad", "note", {}, { idempotencyKey: "k".repeat(200_000) });
    assert.equal(outcome(seat), "invalid_request", JSON.stringify(seat));
    // At the limit it runs.
    const atLimit = await client.call("names.echo", { text: "a" }, { idempotencyKey: "k".repeat(1024) });
    assert.equal(outcome(atLimit), "ok", JSON.stringify(atLimit));
  });
});

describe("a caller's call id", () => {
  it("refuses a second call under an id running on the node; the first is still held and answers (it failed node_lost)", async () => {
    // Longer than a node watch takes to call a call its holder no longer claims lost (2.5 s).
    const first = client.call(
      "names.wait",
      { ms: 5000 },
      { callId: "same-id", timeoutMs: underLoadMs(30_000) },
    );
    await eventually("the first call running", async () => {
      const reply = await raw.request(
        "tackle.tools.names.tools.held",
        JSON.stringify({ callIds: ["same-id"] }),
      );
      return (reply.json() as { held: string[] }).held.length === 1 ? true : undefined;
    });
    const second = await client.call("names.wait", { ms: 0 }, { callId: "same-id" });
    assert.equal(outcome(second), "invalid_request", JSON.stringify(second));
    assert.match(!second.ok ? second.error.message : "", /already running on this node; it did not run/);
    const reply = await raw.request(
      "tackle.tools.names.tools.held",
      JSON.stringify({ callIds: ["same-id"] }),
    );
    assert.deepEqual((reply.json() as { held: string[] }).held, ["same-id"]);
    assert.deepEqual(await first, { ok: true, output: { tool: "wait", ms: 5000 } });
  });
});

describe("sizes and nesting within the payload limit", () => {
  const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
  const request = async (tool: string, body: string, key?: string) => {
    const callHeaders = headers();
    callHeaders.set("Tackle-Timeout-Ms", "10000");
    if (key !== undefined) callHeaders.set("Tackle-Idempotency-Key", key);
    const reply = await raw.request(`tackle.tools.names.${tool}`, body, {
      timeout: 15_000,
      headers: callHeaders,
    });
    const text = new TextDecoder().decode(reply.data);
    return { code: reply.headers?.get("Tackle-Error-Code") ?? "ok", body: JSON.parse(text) as unknown };
  };

  it("answers arguments 100,000 deep, keyed or not (keyed, it overflowed the stack and said the ledger was unreachable)", async () => {
    const body = deep(100_000);
    assert.deepEqual(await request("count", body), {
      code: "ok",
      body: { tool: "count", depth: 100_000, keys: 100_000 },
    });
    const keyed = await request("count", body, "deep-1");
    assert.deepEqual(keyed, { code: "ok", body: { tool: "count", depth: 100_000, keys: 100_000 } });
    // A repeat under the key is answered from the ledger; other arguments under it are refused.
    assert.deepEqual(await request("count", body, "deep-1"), keyed);
    assert.equal((await request("count", deep(99_999), "deep-1")).code, "idempotency_key_reused");
    assert.equal((await request("echo", body, "deep-2")).code, "invalid_input");
    assert.ok(!logger.lines.some((line) => /results ledger unreachable/.test(line.message)));
  });

  it("refuses arguments too deep to write to a launched child as invalid_input: it did not run (it said tool_failed)", async () => {
    const node = await startNodeRuntime({
      config: meshConfig("hostile-2", nats.url, [{ module: "py", path: fixture("python-bundle.py") }]),
    });
    try {
      const body = `{"text":"a","x":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
      for (const key of [undefined, "py-deep"]) {
        const callHeaders = headers();
        if (key !== undefined) callHeaders.set("Tackle-Idempotency-Key", key);
        const reply = await raw.request("tackle.tools.py.upper", body, {
          timeout: 15_000,
          headers: callHeaders,
        });
        assert.equal(reply.headers?.get("Tackle-Error-Code"), "invalid_input");
        assert.match(reply.string(), /nest too deeply to send to its child process .*it did not run/);
      }
      // The child still answers the next call.
      const plain = await raw.request("tackle.tools.py.upper", '{"text":"a"}', { timeout: 15_000 });
      assert.deepEqual(plain.json(), { text: "A" });
    } finally {
      await node.close();
    }
  });

  it("answers 60,000 keys, keyed or not, and keeps answering other calls while such calls arrive", async () => {
    const many = JSON.stringify(Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i])));
    const expected = { code: "ok", body: { tool: "count", depth: 1, keys: 60_000 } };
    assert.deepEqual(await request("count", many), expected);
    assert.deepEqual(await request("count", many, "many-1"), expected);
    // Twenty heavy calls in flight: a small call still answers, in turn, within seconds.
    const heavy = Array.from({ length: 20 }, (_, i) => request("count", i % 2 === 0 ? many : deep(100_000)));
    const started = performance.now();
    assert.deepEqual(await client.call("names.echo", { text: "light" }), {
      ok: true,
      output: { tool: "echo", text: "light" },
    });
    const lightMs = performance.now() - started;
    for (const answer of await Promise.all(heavy)) assert.equal(answer.code, "ok");
    assert.ok(lightMs < underLoadMs(5000), `the small call took ${Math.round(lightMs)} ms`);
  });
});
