/**
 * Progress reports and log lines crossing NATS (a real nats-server on a free port): only for a call
 * that asks, in order, bounded per call; a plain call carries no events header.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connect, type Msg, type NatsConnection, headers as natsHeaders } from "@nats-io/transport-node";
import type { ToolProgress } from "@tackle/core";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { eventLimits, eventsHeader, logLevelHeader, progressHeader } from "../src/nats/call-events.ts";
import { fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
let runtime: NodeRuntime;
let client: MeshClient;
let spy: NatsConnection;
/** Every call request the node receives, as a bystander on the same subjects sees it. */
const requests: Msg[] = [];
const nodeLog = recordingLogger();

before(async () => {
  nats = await startNatsServer();
  runtime = await startNodeRuntime({
    config: meshConfig("node-r", nats.url, [{ module: "reporting", path: fixture("reporting.ts") }]),
    logger: nodeLog,
  });
  client = await createMeshClient({ servers: nats.url });
  spy = await connect({ servers: nats.url });
  spy.subscribe("tackle.tools.reporting.*", {
    callback: (_error, message) => {
      requests.push(message);
    },
  });
  await spy.flush();
});

after(async () => {
  await spy?.close();
  await client?.close();
  await runtime?.close();
  await nats?.close();
});

describe("progress and log lines across NATS: who receives them", () => {
  it("reach a caller that asked, in order, at or above its log level, before the reply", async () => {
    const progress: ToolProgress[] = [];
    const logs = recordingLogger();
    const order: string[] = [];
    requests.length = 0;
    const result = await client.call(
      "reporting.steps",
      {},
      {
        onProgress: (update) => {
          progress.push(update);
          order.push(`progress ${update.progress}`);
        },
        logger: {
          ...logs,
          info: (message, fields) => {
            logs.info(message, fields);
            order.push(`info ${message}`);
          },
        },
        logLevel: "info",
      },
    );
    order.push("reply");
    assert.deepEqual(result, { ok: true, output: { done: true } });
    assert.deepEqual(progress, [
      { progress: 1, total: 3, message: "step 1" },
      { progress: 2, total: 3, message: "step 2" },
      { progress: 3, total: 3, message: "step 3" },
    ]);
    // debug is under the caller's level: it stays on the node.
    assert.deepEqual(
      logs.lines.map((line) => [line.level, line.message, line.fields]),
      [
        ["info", "halfway", { step: 2 }],
        ["warn", "almost done", {}],
        ["error", "not really an error", {}],
      ],
    );
    assert.deepEqual(order, ["progress 1", "progress 2", "info halfway", "progress 3", "reply"]);
    // The node's own log still has every line, the one the caller did not want included.
    assert.ok(nodeLog.lines.some((line) => line.level === "debug" && line.message === "starting"));
    const sent = requests.at(-1);
    assert.match(sent?.headers?.get(eventsHeader) ?? "", /^_INBOX\./);
    assert.equal(sent?.headers?.get(progressHeader), "1");
    assert.equal(sent?.headers?.get(logLevelHeader), "info");
  });

  it("a plain call names no inbox and gets no reports", async () => {
    requests.length = 0;
    assert.deepEqual(await client.call("reporting.steps", {}), { ok: true, output: { done: true } });
    assert.equal(requests.length, 1);
    assert.equal(requests[0]?.headers?.get(eventsHeader), "");
    assert.equal(requests[0]?.headers?.get(progressHeader), "");
    assert.equal(requests[0]?.headers?.get(logLevelHeader), "");
    // A logger without a level asks for nothing either.
    requests.length = 0;
    const logs = recordingLogger();
    await client.call("reporting.steps", {}, { logger: logs });
    assert.equal(requests[0]?.headers?.get(eventsHeader), "");
    assert.deepEqual(logs.lines, []);
  });

  it("progress alone does not bring the log lines", async () => {
    const progress: ToolProgress[] = [];
    requests.length = 0;
    const logs = recordingLogger();
    await client.call("reporting.steps", {}, { onProgress: (update) => progress.push(update), logger: logs });
    assert.equal(progress.length, 3);
    assert.deepEqual(logs.lines, []);
    assert.equal(requests[0]?.headers?.get(logLevelHeader), "");
  });
});

describe("progress and log lines across NATS: bounds and where reports go", () => {
  it("a chatty tool is cut to the burst, and the caller is told how many were dropped", async () => {
    const progress: ToolProgress[] = [];
    const logs = recordingLogger();
    const result = await client.call(
      "reporting.chatty",
      { count: 500 },
      { onProgress: (update) => progress.push(update), logger: logs, logLevel: "warn" },
    );
    assert.deepEqual(result, { ok: true, output: { reported: 500 } });
    assert.ok(
      progress.length >= eventLimits.burst && progress.length < eventLimits.burst + 10,
      `${progress.length}`,
    );
    // The first ones are kept, in order.
    assert.deepEqual(
      progress.slice(0, 3).map((update) => update.progress),
      [1, 2, 3],
    );
    const dropped = logs.lines.find((line) => line.fields.dropped !== undefined);
    assert.equal(dropped?.level, "warn");
    assert.equal(dropped?.fields.dropped, 500 - progress.length);
    assert.match(dropped?.message ?? "", /were dropped on the node/);
  });

  it("an oversized log line loses its fields and is cut, never over the per-message limit", async () => {
    const logs = recordingLogger();
    const result = await client.call(
      "reporting.loud",
      { size: 100_000 },
      { logger: logs, logLevel: "debug" },
    );
    assert.equal(result.ok, true);
    assert.equal(logs.lines.length, 1);
    const [line] = logs.lines;
    assert.deepEqual(line?.fields, { truncated: true });
    assert.match(line?.message ?? "", /^x+… \(cut to fit 8192 bytes\)$/);
    assert.ok((line?.message.length ?? 0) < eventLimits.bytes);
  });

  it("the node sends reports only to an inbox beside the reply: never to a subject the caller names, such as another module's", async () => {
    // A victim: another module's seat subject, and any plain subject. The node's credential may
    // publish there; the caller's may not, so it must not be able to make the node do it.
    const received: string[] = [];
    for (const subject of ["tackle.seats.ledger.append", "victim.subject"]) {
      spy.subscribe(subject, {
        callback: (_error, message) => {
          received.push(`${subject}: ${message.string()}`);
        },
      });
    }
    await spy.flush();
    const lines = () => nodeLog.lines.filter((line) => line.message.startsWith("call events refused")).length;
    const before = lines();
    const caller = await connect({ servers: nats.url });
    try {
      for (const target of ["tackle.seats.ledger.append", "victim.subject", "_INBOX.*", "_INBOX.>"]) {
        const eventHeaders = natsHeaders();
        eventHeaders.set(eventsHeader, target);
        eventHeaders.set(progressHeader, "1");
        eventHeaders.set(logLevelHeader, "debug");
        const reply = await caller.request("tackle.tools.reporting.steps", "{}", {
          headers: eventHeaders,
          timeout: 10_000,
        });
        // The call itself is answered as usual.
        assert.match(reply.string(), /done/);
      }
      await spy.flush();
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual(received, [], "the node published the caller's reports where it was told");
      assert.equal(lines() - before, 4, "each refusal is in the node's log");
      // An inbox beside the reply still gets them (what the mesh client sends).
      const inbox = `_INBOX.${Date.now()}`;
      const got: string[] = [];
      caller.subscribe(inbox, {
        callback: (_error, message) => {
          got.push(message.string());
        },
      });
      const eventHeaders = natsHeaders();
      eventHeaders.set(eventsHeader, inbox);
      eventHeaders.set(progressHeader, "1");
      await caller.request("tackle.tools.reporting.steps", "{}", { headers: eventHeaders, timeout: 10_000 });
      await caller.flush();
      assert.equal(got.length, 3, got.join("\n"));
    } finally {
      await caller.close();
    }
  });
});
