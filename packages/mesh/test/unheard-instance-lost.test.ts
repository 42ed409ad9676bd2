/**
 * A call taken by a node instance this client has not heard from yet still fails `node_lost` when that
 * instance dies (ADR 0225): two node processes serve one module and a client's node watch knows
 * both; node-a is SIGKILLed and, once the killed instance is out of the calls' reckoning,
 * started again under its name (a new instance), and calls sent at once land on it (12 calls over two
 * nodes: some do). The tool blocks node-a's thread as soon as it takes a call, so the new
 * instance answers none of the client's questions; it is SIGKILLed mid-call while node-b still serves.
 * Its announcement as it started serving is all the client knows of it: without it, the calls waited
 * out their deadline and failed `timeout`. The client asks every 1.5 s, and node-a is started just after
 * one of its questions (a plain connection hears them): it serves, takes the calls and dies before the
 * next (its start takes about half a second), as an instance killed within a question's interval of
 * starting would with any `probeMs`.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { defaultModulePrefix } from "../src/config/names.ts";
import { createMeshClient, type MeshClient } from "../src/index.ts";
import { HELD_VERB } from "../src/nats/wire.ts";
import { fixture, startPoolNode } from "./helpers.ts";

/** The calls' own limit: far past the verdict, so a call that waits it out shows as `timeout`. */
const limitMs = 20_000;
const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-unheard-"));
let nats: NatsServerHandle;
let client: MeshClient;
/** A plain connection that hears the client's questions to the module's nodes. */
let listener: NatsConnection;
const children: ChildProcess[] = [];

const startNode = (name: string) =>
  startPoolNode(name, nats.url, children, { module: "holding", path: fixture("holding.mjs") });

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

const linesOf = (file: string): string[] =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

before(async () => {
  nats = await startNatsServer();
  client = await createMeshClient({
    servers: nats.url,
    timeoutMs: limitMs,
    nodeWatch: { probeMs: 1_500, lostAfterMs: 2_000 },
  });
  listener = await connect({ servers: nats.url });
});
after(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await client?.close();
  await listener?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

it("a call to a restarted node's new instance the client never heard from fails node_lost when it dies, not timeout", {
  timeout: 120_000,
}, async () => {
  const [first] = await Promise.all([startNode("node-a"), startNode("node-b")]);
  // The client's watch knows both nodes, node-a as the instance about to be killed.
  const warm = join(directory, "warm");
  const seen = new Set<string>();
  for (let index = 0; index < 40 && seen.size < 2; index++) {
    const result = await client.call("holding.hold", { file: warm, ms: 0 });
    assert.ok(result.ok, result.ok ? "" : result.error.message);
    seen.add((result.output as { node: string }).node);
  }
  assert.equal(seen.size, 2, "both nodes answer");
  await kill(first.process);
  // The killed instance drops out of the calls' reckoning (it answered more than three questions
  // before them): only the new one can have taken them. A call meanwhile, on node-b, keeps the module
  // watched.
  await delay(5_000);
  assert.deepEqual(await client.call("holding.hold", { file: warm, ms: 0 }), {
    ok: true,
    output: { node: "node-b" },
  });
  // Just after a question: the next comes 1.5 s later, once the new instance is dead.
  await new Promise<void>((resolve) => {
    const questions = listener.subscribe(`${defaultModulePrefix("holding")}.${HELD_VERB}`, {
      max: 1,
      callback: () => resolve(),
    });
    void listener.flush().catch(() => questions.unsubscribe());
  });
  const second = await startNode("node-a");

  // At once, before a question of the client's reaches the new instance: the first call it reads
  // blocks it, and those after wait unread in its socket.
  const file = join(directory, "calls");
  const calls = Array.from({ length: 12 }, () =>
    client
      .call("holding.hold", { file, ms: 2_000, blockOn: "node-a" })
      .then((result): { result: ToolCallResult; at: number } => ({ result, at: performance.now() })),
  );
  const until = performance.now() + underLoadMs(10_000);
  while (!linesOf(file).includes("node-a")) {
    assert.ok(performance.now() < until, `no call reached the new node-a: ${JSON.stringify(linesOf(file))}`);
    await delay(5);
  }
  await kill(second.process);
  const killedAt = performance.now();

  const answers = await Promise.all(calls);
  const lost = answers.filter(({ result }) => !result.ok);
  assert.ok(lost.length >= 1, "a call was held by the new node-a");
  for (const { result, at } of answers) {
    if (result.ok) {
      assert.deepEqual(result.output, { node: "node-b" });
      continue;
    }
    assert.equal(result.error.code, "node_lost", JSON.stringify(result.error));
    assert.equal(result.error.retryable, false);
    assert.deepEqual(result.error.data, { tool: "holding.hold", node: "node-a", started: "unknown" });
    // Listed at the next question, failed at the first after lostAfterMs: 3–5 s after the kill.
    assert.ok(
      at - killedAt < underLoadMs(10_000),
      `node_lost ${Math.round(at - killedAt)} ms after the kill`,
    );
  }
  console.log(
    `unheard instance: ${lost.length} of ${answers.length} calls lost with it, answered ${lost.map(({ at }) => Math.round(at - killedAt)).join(", ")} ms after its SIGKILL`,
  );
});
