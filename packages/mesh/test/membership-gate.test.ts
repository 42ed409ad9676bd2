/**
 * Membership gates serving: a node serves exactly what it is issued (open mode only while it holds no
 * membership, announced), a revoke stops serving at once, and a second node offering another bundle
 * under the same module is refused — named in its log and in the catalogue listing — never merged.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  createMeshClient,
  issueMembership,
  type MeshClient,
  readCatalogue,
  revokeMembership,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
let client: MeshClient;
before(async () => {
  nats = await startNatsServer();
  client = await createMeshClient({ servers: nats.url, timeoutMs: 5000 });
});
after(async () => {
  await client?.close();
  await nats?.close();
});

it("serves only issued modules once a node holds a membership (it served everything), and a revoke stops serving within 1 s", async () => {
  const logger = recordingLogger();
  const runtime = await startNodeRuntime({
    config: meshConfig("gate-1", nats.url, [
      { module: "alpha", path: fixture("alpha.ts") },
      { module: "beta", path: fixture("beta.mjs") },
    ]),
    logger,
  });
  try {
    // No membership yet: open mode, announced, everything on its default prefix.
    assert.ok(logger.lines.some((line) => line.level === "warn" && /^open mode/.test(line.message)));
    assert.deepEqual(await client.call("alpha.echo", { text: "open" }), {
      ok: true,
      output: { text: "open" },
    });

    await issueMembership(client.connection, { node: "gate-1", module: "alpha", prefix: "gated.alpha" });
    await eventually("beta no longer served (never issued to gate-1)", async () =>
      runtime.modules().find((info) => info.module === "beta")?.status === "failed" ? true : undefined,
    );
    const beta = runtime.modules().find((info) => info.module === "beta");
    assert.match(beta?.errors.at(-1)?.message ?? "", /not issued to node gate-1: not served/);
    const refusedCall = await client.call("ledger.read", {});
    assert.equal(refusedCall.ok, false);
    const betaCall = await client.call("beta.ledger.read", {});
    assert.ok(!betaCall.ok && betaCall.error.code === "unreachable", JSON.stringify(betaCall));
    await eventually("alpha on its issued prefix", async () => {
      const result = await client.call("alpha.echo", { text: "issued" });
      return result.ok ? result : undefined;
    });

    assert.equal(await revokeMembership(client.connection, { node: "gate-1", module: "alpha" }), true);
    const revokedAt = performance.now();
    await eventually(
      "alpha stops answering after the revoke",
      async () => {
        const answered = await Promise.any([
          client.connection.request("gated.alpha.echo", JSON.stringify({ text: "x" }), { timeout: 200 }),
          client.connection.request("tackle.tools.alpha.echo", JSON.stringify({ text: "x" }), {
            timeout: 200,
          }),
        ]).then(
          () => true,
          () => false,
        );
        return answered ? undefined : true;
      },
      1000,
    );
    assert.ok(performance.now() - revokedAt < 1000);
    assert.equal(runtime.modules().find((info) => info.module === "alpha")?.status, "failed");
  } finally {
    await runtime.close();
  }
});

it("refuses a second node whose bundle differs from the catalogue's digest, naming it in its log and in the listing", async () => {
  await issueMembership(client.connection, { node: "first", module: "same", prefix: "mesh.same" });
  await issueMembership(client.connection, { node: "second", module: "same", prefix: "mesh.same" });
  const first = await startNodeRuntime({
    config: meshConfig("first", nats.url, [{ module: "same", path: fixture("alpha.ts") }]),
  });
  const secondLog = recordingLogger();
  const second = await startNodeRuntime({
    config: meshConfig("second", nats.url, [{ module: "same", path: fixture("toolset-bundle.mjs") }]),
    logger: secondLog,
  });
  try {
    const digest = first.modules()[0]?.digest;
    assert.match(digest ?? "", /^sha256:[0-9a-f]{64}$/);
    const record = (await readCatalogue(client.connection)).find((entry) => entry.module === "same");
    assert.equal(record?.digest, digest);

    const refusal = secondLog.lines.find((line) => line.message.startsWith("module refused"));
    assert.ok(refusal, "the second node logs its refusal");
    assert.match(String(refusal.fields.reason), new RegExp(`has module same as bundle ${digest}`));
    assert.equal(second.modules()[0]?.status, "failed");

    // The listing names the refused node (eventually: a loaded machine may answer the first read late).
    const listed = await eventually("the refusal in the listing", async () => {
      const found = (await client.catalogue()).find((info) => info.module === "same");
      return found?.errors.some((error) => error.source === "node second") ? found : undefined;
    });
    assert.equal(listed?.status, "ok");
    assert.equal(listed?.node, "first");
    assert.ok(
      listed?.errors.some((error) =>
        /node second offers another bundle .*: refused, not merged/.test(error.message),
      ),
      JSON.stringify(listed?.errors),
    );
    // Never merged: every call lands on the first node's bundle (the second's has no echo).
    for (let index = 0; index < 10; index += 1) {
      assert.deepEqual(await client.call("same.echo", { text: `${index}` }), {
        ok: true,
        output: { text: `${index}` },
      });
    }
  } finally {
    await second.close();
    await first.close();
  }
});
