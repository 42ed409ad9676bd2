/** A message over the broker's max_payload: a clear, non-retryable error stating the limit, both ways. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, startNodeRuntime } from "../src/index.ts";
import { fixture, meshConfig } from "./helpers.ts";

let nats: NatsServerHandle;
let folder: string;
before(async () => {
  folder = mkdtempSync(join(tmpdir(), "tackle-payload-"));
  const config = join(folder, "nats.conf");
  writeFileSync(config, "max_payload: 65536\n");
  nats = await startNatsServer({ extraArgs: ["-c", config] });
});
after(async () => {
  await nats?.close();
  rmSync(folder, { recursive: true, force: true });
});

it("refuses arguments and results over max_payload as payload_too_large, not retryable, naming the limit", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-p", nats.url, [{ module: "sizes", path: fixture("sizes.mjs") }]),
  });
  const client = await createMeshClient({ servers: nats.url });
  try {
    assert.deepEqual(await client.call("sizes.repeat", { bytes: 3 }), { ok: true, output: "xxx" });

    const big = await client.call("sizes.repeat", { bytes: 1, pad: "y".repeat(100_000) });
    assert.ok(!big.ok);
    assert.equal(big.error.code, "payload_too_large");
    assert.equal(big.error.retryable, false);
    assert.match(big.error.message, /over the broker's limit of 65536 bytes \(max_payload\)/);

    // An answer JSON cannot write is the tool's bug, named: not a failure that escaped the tool set.
    const count = await client.call("sizes.count", {});
    assert.equal(!count.ok && count.error.code, "invalid_output");
    assert.match(!count.ok ? count.error.message : "", /not JSON: .*BigInt/);

    const answer = await client.call("sizes.repeat", { bytes: 100_000 });
    assert.ok(!answer.ok);
    assert.equal(answer.error.code, "payload_too_large");
    assert.equal(answer.error.retryable, false);
    assert.match(
      answer.error.message,
      /"sizes\.repeat": a result of 100002 bytes is over the broker's limit of 65536 bytes/,
    );
  } finally {
    await client.close();
    await runtime.close();
  }
});
