/**
 * Credentials the mesh issues (ADR 0209), attacked from the holder's side on nats-server in operator
 * mode with a `full` resolver: a node's credential reaches only its modules, a client's only the
 * modules it names, nobody but the issuer writes memberships, a revoked credential is cut off within
 * 2 s, another account's credential sees nothing of the mesh, and a node's announcement as it starts
 * serving (ADR 0225) reaches a client of its module, which may not make one.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { createAccount } from "@nats-io/jwt";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  type IssuedCredential,
  issueClientCredential,
  issueIssuerCredential,
  issueNodeCredential,
  issueSystemCredential,
  revokeCredential,
} from "../src/credentials/issue-credential.ts";
import { createMeshAuthority, type MeshAuthority, serverConfig } from "../src/credentials/mesh-authority.ts";
import { pushAccount } from "../src/credentials/push-account.ts";
import {
  CATALOGUE_BUCKET,
  connectMesh,
  createMeshClient,
  issueMembership,
  listMemberships,
  loadMeshConfig,
  type MeshClient,
  type NodeRuntime,
  startNodeRuntime,
} from "../src/index.ts";
import { SERVING_VERB } from "../src/nats/wire.ts";
import { eventually, fixture, recordingLogger } from "./helpers.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-issued-"));
let authority: MeshAuthority;
let nats: NatsServerHandle;
let system: NatsConnection;
let admin: MeshClient;
const runtimes: NodeRuntime[] = [];
const nodeLogs = [recordingLogger(), recordingLogger()];
const notesReach = { module: "notes", prefix: "tackle.tools.notes" };
const ledgerReach = {
  module: "ledger",
  prefix: "tackle.tools.ledger",
  seats: { ledger: "tackle.seats.ledger" },
};

function write(credential: IssuedCredential): string {
  const path = join(directory, `${credential.name}-${credential.publicKey.slice(0, 8)}.creds`);
  writeFileSync(path, credential.creds, { mode: 0o600 });
  return path;
}

before(async () => {
  authority = createMeshAuthority();
  const resolver = join(directory, "resolver");
  mkdirSync(resolver);
  const configFile = join(directory, "server.conf");
  writeFileSync(configFile, await serverConfig(authority, { resolverDirectory: resolver }));
  nats = await startNatsServer({ extraArgs: ["-c", configFile] });
  system = await connectMesh({ servers: nats.url, credsFile: write(await issueSystemCredential(authority)) });
  admin = await createMeshClient({
    servers: nats.url,
    credsFile: write(await issueIssuerCredential(authority)),
  });
  await issueMembership(admin.connection, { node: "node-a", module: "notes" });
  await issueMembership(admin.connection, { node: "node-b", module: "ledger", seats: ["ledger"] });
  const nodes = [
    ["node-a", `notes=${fixture("alpha.ts")},notes=${fixture("reporting.ts")}`, notesReach],
    ["node-b", `ledger=${fixture("beta.mjs")}`, ledgerReach],
  ] as const;
  for (const [index, [node, modules, reach]] of nodes.entries()) {
    const credential = await issueNodeCredential(authority, { node, modules: [reach] });
    runtimes.push(
      await startNodeRuntime({
        config: loadMeshConfig({
          MESH_NODE: node,
          MESH_BROKER_FILE: write(credential),
          MESH_BROKER_URL: nats.url,
          MESH_TOOL_MODULES: modules,
        }),
        logger: nodeLogs[index] ?? recordingLogger(),
      }),
    );
  }
  await eventually("both modules served", async () => {
    const [ledger, echoed] = await Promise.all([
      admin.callSeat("ledger", "read", {}),
      admin.call("notes.echo", { text: "up" }),
    ]);
    return ledger.ok && echoed.ok ? true : undefined;
  });
});
after(async () => {
  await admin?.close();
  for (const runtime of runtimes) await runtime.close();
  await system?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

/** Resolves with the server's refusal when a subscription is refused, or undefined after `ms`. */
async function subscribeRefused(
  connection: NatsConnection,
  subject: string,
  ms = 1500,
): Promise<string | undefined> {
  const subscription = connection.subscribe(subject);
  const refusal = subscription.closed.then(
    (error) => (error instanceof Error ? error.message : undefined),
    (error: unknown) => (error as Error).message,
  );
  const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms));
  const result = await Promise.race([refusal, timeout]);
  if (result === undefined) subscription.unsubscribe();
  return result;
}

it("a node's own credential serves its module and nothing of another's", async () => {
  // The notes node's credential in an attacker's hands.
  const stolen = await issueNodeCredential(authority, { node: "node-a", modules: [notesReach] });
  const attacker = await createMeshClient({ servers: nats.url, credsFile: write(stolen), timeoutMs: 5000 });
  try {
    for (const attempt of [
      () => attacker.call("ledger.context", {}),
      () => attacker.callSeat("ledger", "append", { line: "forged" }),
    ]) {
      const refused = await attempt();
      assert.equal(!refused.ok && refused.error.code, "forbidden", JSON.stringify(refused));
    }
    // It cannot listen on the ledger's subjects (to read its calls or answer them), nor on other callers' inboxes.
    for (const subject of [
      "tackle.tools.ledger.>",
      "tackle.seats.ledger.append",
      "_INBOX.>",
      "$SRV.INFO.ledger",
    ]) {
      assert.match(
        (await subscribeRefused(attacker.connection, subject)) ?? "accepted",
        /permission/i,
        subject,
      );
    }
    // Its writes reach neither the memberships, nor the ledger's catalogue record, nor the ledger's results.
    await assert.rejects(
      issueMembership(attacker.connection, {
        node: "node-a",
        module: "ledger",
        prefix: "tackle.tools.stolen",
      }),
      /permission/i,
    );
    const kvm = new Kvm(attacker.connection);
    const catalogue = await kvm.open(CATALOGUE_BUCKET);
    await assert.rejects(
      catalogue.put("ledger", JSON.stringify({ module: "ledger", prefix: "x" })),
      /permission|timeout/i,
    );
    await assert.rejects(
      (async () => (await kvm.create("tackle-mesh-results-ledger")).put("k", "forged"))(),
      /permission|timeout/i,
    );
  } finally {
    await attacker.close();
  }
  assert.deepEqual(await admin.callSeat("ledger", "read", {}), { ok: true, output: { entries: [] } });
  assert.deepEqual(
    (await listMemberships(admin.connection)).map((record) => [record.node, record.module, record.prefix]),
    [
      ["node-a", "notes", "tackle.tools.notes"],
      ["node-b", "ledger", "tackle.tools.ledger"],
    ],
  );
  // The nodes ran on their own credentials without one refused publish or subscription.
  for (const log of nodeLogs) {
    assert.deepEqual(
      log.lines.filter((line) => /permission/i.test(`${line.message} ${JSON.stringify(line.fields)}`)),
      [],
    );
  }
});

it("a client's credential calls the modules it names, with their progress, and no other", async () => {
  const credential = await issueClientCredential(authority, { name: "notes-console", modules: [notesReach] });
  const client = await createMeshClient({ servers: nats.url, credsFile: write(credential), timeoutMs: 5000 });
  try {
    const progress: number[] = [];
    // Its events come on the module's events subject, the only one the node may publish them to.
    const stepped = await client.call(
      "notes.steps",
      {},
      { onProgress: (update) => progress.push(update.progress) },
    );
    assert.deepEqual(stepped, { ok: true, output: { done: true } });
    assert.deepEqual(progress, [1, 2, 3]);
    assert.deepEqual(await client.call("notes.echo", { text: "mine" }), {
      ok: true,
      output: { text: "mine" },
    });
    // A call under an idempotency key goes through the module's results ledger, on the node's credential.
    for (let repeat = 0; repeat < 2; repeat++) {
      assert.deepEqual(await client.call("notes.echo", { text: "once" }, { idempotencyKey: "k-1" }), {
        ok: true,
        output: { text: "once" },
      });
    }
    const catalogue = await client.catalogue();
    assert.equal(catalogue.find((module) => module.module === "notes")?.status, "ok");
    for (const attempt of [
      () => client.call("ledger.context", {}),
      () => client.callSeat("ledger", "read", {}),
    ]) {
      const refused = await attempt();
      assert.equal(!refused.ok && refused.error.code, "forbidden", JSON.stringify(refused));
    }
    // It may not pose as the notes node either: neither serve its subjects nor publish its events.
    assert.match(
      (await subscribeRefused(client.connection, "tackle.tools.notes.echo")) ?? "accepted",
      /permission/i,
    );
    await assert.rejects(
      issueMembership(client.connection, { node: "node-a", module: "notes", prefix: "tackle.tools.moved" }),
      /permission/i,
    );
  } finally {
    await client.close();
  }
});

it("a revoked credential is cut off within 2 s and refused after", async () => {
  const credential = await issueClientCredential(authority, { name: "leaver", modules: [notesReach] });
  const path = write(credential);
  const client = await createMeshClient({ servers: nats.url, credsFile: path, timeoutMs: 3000 });
  try {
    assert.equal((await client.call("notes.echo", { text: "before" })).ok, true);
    const revokedAt = Date.now();
    authority = revokeCredential(authority, credential.publicKey);
    await pushAccount(system, authority);
    const cutAfter = await eventually(
      "the revoked connection refused",
      async () =>
        (await client.call("notes.echo", { text: "after" })).ok ? undefined : Date.now() - revokedAt,
      5000,
    );
    assert.ok(cutAfter < 2000, `cut off ${cutAfter} ms after the revocation`);
    await assert.rejects(
      connectMesh({ servers: nats.url, credsFile: path, connectTimeoutMs: 3000 }).then(async (late) => {
        // waitOnFirstConnect is off: a refused first connection rejects.
        await late.close();
      }),
      /authorization|revoked/i,
    );
  } finally {
    // Its connection keeps dialling a server that refuses it: close answers at once all the same.
    await client.close();
  }
  // The others are untouched.
  assert.equal((await admin.call("notes.echo", { text: "still" })).ok, true);
});

it("another account's credential sees nothing of the mesh", async () => {
  // An account the same operator trusts, pushed to the resolver like any account update.
  const other: MeshAuthority = {
    ...authority,
    accountName: "elsewhere",
    accountSeed: new TextDecoder().decode(createAccount().getSeed()),
    revocations: {},
  };
  await pushAccount(system, other);
  const credential = await issueIssuerCredential(other, "elsewhere-admin");
  const stranger = await createMeshClient({
    servers: nats.url,
    credsFile: write(credential),
    timeoutMs: 3000,
  });
  try {
    const called = await stranger.call("notes.echo", { text: "hello?" });
    assert.equal(!called.ok && called.error.code, "unreachable", JSON.stringify(called));
    assert.deepEqual(await listMemberships(stranger.connection), []);
    assert.deepEqual(
      (await stranger.catalogue()).map((module) => module.module),
      [],
    );
    // What it writes lands in its own account: the mesh's memberships are as they were.
    await issueMembership(stranger.connection, {
      node: "node-a",
      module: "notes",
      prefix: "tackle.tools.elsewhere",
    });
    assert.equal(
      (await listMemberships(admin.connection, { module: "notes" }))[0]?.prefix,
      "tackle.tools.notes",
    );
    assert.deepEqual(await admin.call("notes.echo", { text: "ours" }), {
      ok: true,
      output: { text: "ours" },
    });
  } finally {
    await stranger.close();
  }
});

it("a node's credential announces it as it starts serving; a client's hears it and may not announce one", async () => {
  const credential = await issueClientCredential(authority, { name: "watcher", modules: [notesReach] });
  const client = await createMeshClient({ servers: nats.url, credsFile: write(credential), timeoutMs: 5000 });
  const subject = `${notesReach.prefix}.${SERVING_VERB}`;
  const notices: unknown[] = [];
  try {
    const heard = client.connection.subscribe(subject, {
      callback: (error, message) => {
        if (error === null) notices.push(message.json());
      },
    });
    await client.connection.flush();
    // A fake announcement from the client is refused by the server: its own subscription never gets it.
    client.connection.publish(
      subject,
      JSON.stringify({ prefix: notesReach.prefix, node: "fake", instance: "x" }),
    );
    // node-a, restarted on a fresh credential: a new instance announces itself (ADR 0225).
    await runtimes[0]?.close();
    const log = recordingLogger();
    runtimes[0] = await startNodeRuntime({
      config: loadMeshConfig({
        MESH_NODE: "node-a",
        MESH_BROKER_FILE: write(
          await issueNodeCredential(authority, { node: "node-a", modules: [notesReach] }),
        ),
        MESH_BROKER_URL: nats.url,
        MESH_TOOL_MODULES: `notes=${fixture("alpha.ts")},notes=${fixture("reporting.ts")}`,
      }),
      logger: log,
    });
    await eventually("the announcement heard", async () => (notices.length > 0 ? true : undefined));
    assert.equal(heard.isClosed(), false, "the client's credential may read the announcements");
    assert.equal(notices.length, 1, JSON.stringify(notices));
    const [notice] = notices as [{ prefix: string; node: string; instance: string }];
    assert.deepEqual(
      { ...notice, instance: typeof notice.instance },
      {
        prefix: notesReach.prefix,
        node: "node-a",
        instance: "string",
      },
    );
    assert.deepEqual(
      log.lines.filter((line) => /permission/i.test(`${line.message} ${JSON.stringify(line.fields)}`)),
      [],
    );
    assert.deepEqual(await client.call("notes.echo", { text: "back" }), {
      ok: true,
      output: { text: "back" },
    });
  } finally {
    await client.close();
  }
});
