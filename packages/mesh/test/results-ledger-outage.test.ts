/**
 * The results ledger through a broker outage (ADR 0211): a node that finishes a keyed call while its
 * broker is down writes the call's record once the broker is back, so the caller's repeat under the key
 * is answered with the first call's result instead of waiting on a record that says `running` under a
 * node that lives, and the tool does not run again. Its own nats-server: this suite stops and starts it.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { fixture, meshConfig } from "./helpers.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-results-outage-"));
let nats: NatsServerHandle;
let runtime: NodeRuntime;
let client: MeshClient;

before(async () => {
  nats = await startNatsServer();
  runtime = await startNodeRuntime({
    config: meshConfig("node-a", nats.url, [{ module: "effects", path: fixture("effects.mjs") }]),
  });
  client = await createMeshClient({ servers: nats.url, timeoutMs: 8000 });
});
after(async () => {
  await client?.close();
  await runtime?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

const effects = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

it("a keyed call finished during a broker outage is recorded once the broker is back, and not run again", {
  timeout: 180_000,
}, async () => {
  const file = join(directory, "outage");
  // The module's results bucket exists before the outage (a first keyed call makes it).
  const warm = await client.call(
    "effects.apply",
    { file: join(directory, "warm"), id: "w" },
    { idempotencyKey: "warm" },
  );
  assert.equal(warm.ok, true, JSON.stringify(warm));

  const args = { file, id: "k", ms: 1500 };
  const first = client.call("effects.apply", args, { idempotencyKey: "run-9:step-1" });
  await sleep(500); // the tool runs on the node
  await nats.stop();
  // The tool finishes while the broker is down: its effect lands, its record cannot.
  const deadline = Date.now() + 30_000;
  while (effects(file).length === 0) {
    assert.ok(Date.now() < deadline, "the tool never finished");
    await sleep(50);
  }
  await sleep(500);
  await nats.restart();
  // Its reply may cross the outage (the node's client holds what it publishes while disconnected) or
  // be lost with it; either way the record's write failed while the broker was down.
  await first;

  // The repeat under the key gets the first call's result: no "still running", no second run.
  let repeat = await client.call("effects.apply", args, { idempotencyKey: "run-9:step-1" });
  const until = Date.now() + 60_000;
  while (!repeat.ok && repeat.error.retryable && Date.now() < until) {
    await sleep(250);
    repeat = await client.call("effects.apply", args, { idempotencyKey: "run-9:step-1" });
  }
  assert.deepEqual(repeat, { ok: true, output: { id: "k", node: "node-a" } });
  assert.equal(effects(file).length, 1, effects(file).join("\n"));
});
