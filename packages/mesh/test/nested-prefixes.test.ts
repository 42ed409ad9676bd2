/**
 * Module prefixes that nest (ADR 0219): `acme.a` and `acme.a.b` would put module `acme.a`'s tool `b.x`
 * and module `acme.a.b`'s tool `x` on one subject. Issuing one is refused naming both (against the
 * catalogue and every node's membership, stale ones included); a node whose records already nest
 * serves the earlier-issued module and refuses the later one; open mode yields to an issued module;
 * a credential is never issued for modules whose prefixes nest.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  CATALOGUE_BUCKET,
  connectMesh,
  createMeshAuthority,
  issueClientCredential,
  issueIssuerCredential,
  issueMembership,
  issueNodeCredential,
  MEMBERSHIP_BUCKET,
  MeshConfigError,
  MeshPrefixConflictError,
  type NodeRuntime,
  openMeshBuckets,
  serverConfig,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
let admin: NatsConnection;
const runtimes: NodeRuntime[] = [];
before(async () => {
  nats = await startNatsServer();
  admin = await connectMesh({ servers: nats.url });
});
after(async () => {
  for (const runtime of runtimes) await runtime.close();
  await admin?.drain();
  await nats?.close();
});

/** Why the runtime does not serve `module`: the error its listing reports for this node. */
function notServed(runtime: NodeRuntime, module: string): string {
  const info = runtime.modules().find((entry) => entry.module === module);
  assert.equal(info?.status, "failed", `${module} is served: ${JSON.stringify(info)}`);
  return info.errors.map((error) => error.message).join("; ");
}

/** What `issueMembership` rejects with: a MeshPrefixConflictError naming both modules and both prefixes. */
function conflict(module: string, prefix: string, heldBy: string, heldPrefix: string) {
  return (error: unknown) => {
    assert.ok(MeshPrefixConflictError.isInstance(error), `not a MeshPrefixConflictError: ${String(error)}`);
    assert.ok(MeshConfigError.isInstance(error), "still a MeshConfigError, for callers that catch those");
    assert.deepEqual(
      [error.module, error.prefix, error.heldBy, error.heldPrefix],
      [module, prefix, heldBy, heldPrefix],
    );
    for (const name of [module, prefix, heldPrefix])
      assert.match(error.message, new RegExp(name.replaceAll(".", "\\.")));
    return true;
  };
}

it("issuing a prefix that nests with another module's is refused naming both, either way round and after a move", async () => {
  await issueMembership(admin, { node: "node-1", module: "outer", prefix: "acme.a" });

  // Under a held prefix, and over one: both refused, the held module named.
  await assert.rejects(
    issueMembership(admin, { node: "node-1", module: "inner", prefix: "acme.a.b" }),
    conflict("inner", "acme.a.b", "outer", "acme.a"),
  );
  await assert.rejects(
    issueMembership(admin, { node: "node-2", module: "top", prefix: "acme" }),
    conflict("top", "acme", "outer", "acme.a"),
  );
  // The message shows the subject the two would share.
  await assert.rejects(
    issueMembership(admin, { node: "node-1", module: "inner", prefix: "acme.a.b" }),
    /module outer's tool b\.x and module inner's tool x are both acme\.a\.b\.x/,
  );
  // Every default prefix (open mode's) lies under tackle.tools: neither it nor tackle may be issued.
  for (const prefix of ["tackle.tools", "tackle"]) {
    await assert.rejects(
      issueMembership(admin, { node: "node-2", module: "greedy", prefix }),
      conflict("greedy", prefix, "*", "tackle.tools.<module>"),
    );
  }

  // A prefix that only starts with the same letters does not nest; nothing was written for the refused ones.
  await issueMembership(admin, { node: "node-2", module: "sibling", prefix: "acme.ab" });
  const buckets = await openMeshBuckets(admin);
  for (const key of ["node-1.inner", "node-2.top", "node-2.greedy"]) {
    assert.equal(await buckets.membership.get(key), null, `${key} written`);
  }

  // outer moves on another node: the catalogue says zed.a, but node-1 still holds acme.a (a stale
  // membership it serves until revoked), so acme.a.b is still refused, naming where it is held.
  await issueMembership(admin, { node: "node-2", module: "outer", prefix: "zed.a" });
  await assert.rejects(
    issueMembership(admin, { node: "node-3", module: "inner", prefix: "acme.a.b" }),
    (error: unknown) =>
      conflict("inner", "acme.a.b", "outer", "acme.a")(error) &&
      /node node-1's membership/.test((error as Error).message),
  );
  // A module's own prefixes never conflict with it: it may move under or over where it was.
  await issueMembership(admin, { node: "node-3", module: "outer", prefix: "zed.a.v2" });
});

/** Writes membership and catalogue records as a mesh issued before ADR 0219 could hold them. */
async function writeRecord(node: string, module: string, prefix: string, issuedAt: string): Promise<void> {
  const kvm = new Kvm(admin);
  const membership = await kvm.open(MEMBERSHIP_BUCKET);
  const catalogue = await kvm.open(CATALOGUE_BUCKET);
  await membership.put(`${node}.${module}`, JSON.stringify({ node, module, prefix, seats: {}, issuedAt }));
  await catalogue.put(module, JSON.stringify({ module, prefix, updatedAt: issuedAt }));
}

async function answersAt(prefix: string): Promise<boolean> {
  try {
    await admin.request(`${prefix}.tools`, undefined, { timeout: 500 });
    return true;
  } catch {
    return false;
  }
}

it("a node whose records already nest serves the earlier-issued module and refuses the later one, naming both", async () => {
  // Written straight into the buckets, as issueMembership let them be before: ledger's tool
  // ledger.read is nest.a.ledger.read, and nester's prefix nest.a.ledger lies under nest.a.
  await writeRecord("node-n", "ledger", "nest.a", "2026-01-01T00:00:00.000Z");
  await writeRecord("node-n", "nester", "nest.a.ledger", "2026-01-02T00:00:00.000Z");
  const logger = recordingLogger();
  const runtime = await startNodeRuntime({
    config: meshConfig("node-n", nats.url, [
      { module: "nester", path: fixture("alpha.ts") },
      { module: "ledger", path: fixture("beta.mjs") },
    ]),
    logger,
  });
  runtimes.push(runtime);
  await eventually("ledger served at nest.a", async () => ((await answersAt("nest.a")) ? true : undefined));
  assert.equal(await answersAt("nest.a.ledger"), false, "the later module is not served under the earlier");
  assert.match(
    notServed(runtime, "nester"),
    /prefix nest\.a\.ledger of module nester nests with prefix nest\.a, held by module ledger/,
  );
  assert.ok(
    logger.lines.some((line) => line.level === "error" && /nests/.test(String(line.fields.reason))),
    "the refusal is logged as an error",
  );
});

it("open mode does not serve a module on its default prefix when an issued module holds a prefix nesting with it", async () => {
  // Another node was issued module squatter on tackle.tools.gamma: gamma's default prefix.
  await writeRecord("node-x", "squatter", "tackle.tools.gamma", "2026-01-03T00:00:00.000Z");
  const runtime = await startNodeRuntime({
    config: meshConfig("node-open", nats.url, [{ module: "gamma", path: fixture("alpha.ts") }]),
    logger: recordingLogger(),
  });
  runtimes.push(runtime);
  assert.match(notServed(runtime, "gamma"), /tackle\.tools\.gamma is already module squatter's/);
  assert.equal(await answersAt("tackle.tools.gamma"), false, "nobody answers: squatter's node is not up");
});

it("in operator mode, nested prefixes are refused to the issuer, and no credential reaches two that nest", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-nested-"));
  const authority = createMeshAuthority();
  const resolver = join(directory, "resolver");
  mkdirSync(resolver);
  const configFile = join(directory, "server.conf");
  writeFileSync(configFile, await serverConfig(authority, { resolverDirectory: resolver }));
  const operated = await startNatsServer({ extraArgs: ["-c", configFile] });
  const credsFile = join(directory, "issuer.creds");
  writeFileSync(credsFile, (await issueIssuerCredential(authority)).creds, { mode: 0o600 });
  const issuer = await connectMesh({ servers: operated.url, credsFile });
  try {
    await issueMembership(issuer, { node: "node-a", module: "outer", prefix: "acme.a" });
    await assert.rejects(
      issueMembership(issuer, { node: "node-b", module: "inner", prefix: "acme.a.b" }),
      conflict("inner", "acme.a.b", "outer", "acme.a"),
    );
    // Why: NATS's `>` matches one or more tokens, so outer's node credential (`acme.a.>`) may
    // already listen on every subject of a module issued under it, had one been.
    const outerNode = join(directory, "outer-node.creds");
    const outerReach = [{ module: "outer", prefix: "acme.a" }];
    writeFileSync(
      outerNode,
      (await issueNodeCredential(authority, { node: "node-a", modules: outerReach })).creds,
    );
    const node = await connectMesh({ servers: operated.url, credsFile: outerNode });
    try {
      const subscription = node.subscribe("acme.a.b.x");
      const refused = await Promise.race([
        subscription.closed.then((error) => (error instanceof Error ? error.message : "closed")),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
      ]);
      assert.equal(refused, undefined, "acme.a.> covers acme.a.b.x");
    } finally {
      await node.close();
    }
    const nested = [
      { module: "outer", prefix: "acme.a" },
      { module: "inner", prefix: "acme.a.b" },
    ];
    assert.throws(
      () => issueNodeCredential(authority, { node: "node-a", modules: nested }),
      conflict("inner", "acme.a.b", "outer", "acme.a"),
    );
    assert.throws(
      () => issueClientCredential(authority, { name: "caller", modules: nested }),
      conflict("inner", "acme.a.b", "outer", "acme.a"),
    );
  } finally {
    await issuer.drain();
    await operated.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
