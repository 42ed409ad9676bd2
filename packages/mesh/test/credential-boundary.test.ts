/**
 * The mesh's boundary is the broker credential's permissions (Tackle does not yet generate them): with
 * a credential that may publish only to its own module's subjects, a module's client calling another
 * module's tools or seat verbs is answered `forbidden`, and it cannot rewrite the memberships that
 * place modules on nodes; the other module's state is untouched. Real nats-server in operator mode.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  createMeshClient,
  issueMembership,
  listMemberships,
  loadMeshConfig,
  MEMBERSHIP_BUCKET,
  type MeshClient,
  type NodeRuntime,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture } from "./helpers.ts";
import { operatorMode } from "./operator-credentials.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-boundary-"));
let nats: NatsServerHandle;
let runtime: NodeRuntime;
let admin: MeshClient;
let notes: MeshClient;

before(async () => {
  const operator = operatorMode(directory);
  nats = await startNatsServer({ extraArgs: ["-c", operator.configFile] });
  runtime = await startNodeRuntime({
    config: loadMeshConfig({
      MESH_NODE: "node-b",
      MESH_BROKER_FILE: operator.userCredentials("node"),
      MESH_BROKER_URL: nats.url,
      MESH_TOOL_MODULES: `ledger=${fixture("beta.mjs")},notes=${fixture("alpha.ts")}`,
    }),
  });
  admin = await createMeshClient({ servers: nats.url, credsFile: operator.userCredentials("admin") });
  await issueMembership(admin.connection, { node: "node-b", module: "ledger", seats: ["ledger"] });
  await issueMembership(admin.connection, { node: "node-b", module: "notes" });
  await eventually("both modules served", async () => {
    const [ledger, echoed] = await Promise.all([
      admin.callSeat("ledger", "read", {}),
      admin.call("notes.echo", { text: "up" }),
    ]);
    return ledger.ok && echoed.ok ? true : undefined;
  });
  // The notes module's own credential: it may publish anywhere but the ledger's tools, every seat,
  // and the membership bucket (a KV write is a publish to `$KV.<bucket>.<key>`).
  notes = await createMeshClient({
    servers: nats.url,
    credsFile: operator.userCredentials("notes-module", {
      denyPublish: ["tackle.tools.ledger.>", "tackle.seats.>", `$KV.${MEMBERSHIP_BUCKET}.>`],
    }),
    timeoutMs: 10_000,
  });
});
after(async () => {
  await notes?.close();
  await admin?.close();
  await runtime?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

it("another module's tools and seat verbs answer forbidden; its own tools answer", async () => {
  assert.deepEqual(await notes.call("notes.echo", { text: "mine" }), { ok: true, output: { text: "mine" } });
  for (const attempt of [
    () => notes.call("ledger.context", {}),
    () => notes.call("ledger.ledger.append", { line: "forged" }),
    () => notes.callSeat("ledger", "append", { line: "forged" }),
    () => notes.callSeat("ledger", "read", {}),
  ]) {
    const started = Date.now();
    const refused = await attempt();
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.error.code, "forbidden", JSON.stringify(refused));
    assert.ok(Date.now() - started < 5_000, "refused at once, not at the call's deadline");
  }
  // Nothing the refused calls carried reached the ledger.
  assert.deepEqual(await admin.callSeat("ledger", "read", {}), { ok: true, output: { entries: [] } });
});

it("it cannot rewrite the memberships that place modules on nodes", async () => {
  await assert.rejects(
    issueMembership(notes.connection, { node: "node-b", module: "ledger", prefix: "tackle.tools.stolen" }),
    /permission|Permissions Violation/i,
  );
  const records = await listMemberships(admin.connection, { module: "ledger" });
  assert.deepEqual(
    records.map((record) => [record.node, record.prefix, Object.keys(record.seats)]),
    [["node-b", "tackle.tools.ledger", ["ledger"]]],
  );
  assert.equal((await admin.callSeat("ledger", "read", {})).ok, true, "the ledger still serves where it was");
});
