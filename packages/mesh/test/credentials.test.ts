/**
 * The node's credential (user JWT + nkey seed) against nats-server in operator mode: the runtime
 * connects on it serving three modules (one broken, named and not fatal), a bare MESH_TOOL_MODULES
 * path belongs to its module, and a connection without it is refused.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { connect } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, issueMembership, loadMeshConfig, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture } from "./helpers.ts";
import { type OperatorMode, operatorMode } from "./operator-credentials.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-creds-"));
let nats: NatsServerHandle;
let operator: OperatorMode;
before(async () => {
  operator = operatorMode(directory);
  nats = await startNatsServer({ extraArgs: ["-c", operator.configFile] });
});
after(async () => {
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

it("runs the node on its credential: three modules, one broken and named, a bare path as the credential's own module", async () => {
  const nodeCredential = operator.userCredentials("ledger");
  const config = loadMeshConfig({
    MESH_NODE: "node-k",
    MESH_BROKER_FILE: nodeCredential,
    MESH_BROKER_URL: nats.url,
    // Three modules on the one credential; "gone" is broken (its only bundle throws at import).
    MESH_TOOL_MODULES: `${fixture("beta.mjs")},notes=${fixture("python-bundle.py")},gone=${fixture("throws-at-import.js")}`,
  });
  assert.deepEqual(
    config.modules.map((entry) => entry.module),
    ["ledger", "notes", "gone"],
  );
  // "notes" is a python3 child: its start took 11 s at load 35, past the 10 s default.
  const runtime = await startNodeRuntime({
    load: { child: { handshakeTimeoutMs: underLoadMs(10_000) } },
    config,
  });
  const client = await createMeshClient({
    servers: nats.url,
    credsFile: operator.userCredentials("console"),
  });
  try {
    // A node serves exactly what it is issued: all three (open mode ends with the first).
    await issueMembership(client.connection, { node: "node-k", module: "ledger", seats: ["ledger"] });
    await issueMembership(client.connection, { node: "node-k", module: "notes" });
    await issueMembership(client.connection, { node: "node-k", module: "gone" });
    await eventually("notes served on its membership", async () => {
      const result = await client.call("notes.upper", { text: "signed" });
      return result.ok ? result : undefined;
    });
    assert.deepEqual(await client.call("notes.upper", { text: "signed" }), {
      ok: true,
      output: { text: "SIGNED" },
    });
    const appended = await client.callSeat("ledger", "append", { line: "on a credential" });
    assert.deepEqual(appended, { ok: true, output: { count: 1, node: "node-k", module: "ledger" } });
    const catalogue = await client.catalogue();
    assert.deepEqual(catalogue.map((module) => [module.module, module.status]).sort(), [
      ["gone", "failed"],
      ["ledger", "ok"],
      ["notes", "ok"],
    ]);
    // The broken module is named with its error, not fatal: the other two serve beside it.
    assert.deepEqual(catalogue.find((module) => module.module === "gone")?.errors, [
      { source: fixture("throws-at-import.js"), message: "broken bundle: cannot reach its database" },
    ]);
    await assert.rejects(
      connect({ servers: nats.url, reconnect: false }),
      /Authorization|authorization|auth/i,
    );

    // The credential's permissions are what enforce the subjects: one denied the notes module is refused.
    const limited = await createMeshClient({
      servers: nats.url,
      credsFile: operator.userCredentials("limited", { denyPublish: ["tackle.tools.notes.>"] }),
    });
    try {
      const refused = await limited.call("notes.upper", { text: "x" });
      assert.equal(!refused.ok && refused.error.code, "forbidden");
      assert.match(!refused.ok ? refused.error.message : "", /may not call "notes\.upper"/);
      assert.equal((await limited.callSeat("ledger", "read", {})).ok, true);
    } finally {
      await limited.close();
    }
  } finally {
    await client.close();
    await runtime.close();
  }
});
