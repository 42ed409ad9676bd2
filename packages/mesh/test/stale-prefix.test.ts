/**
 * A long-lived client (what the console holds) while a module's prefix moves under it: issued,
 * re-issued elsewhere, revoked and issued again. Its listing and its calls follow every move; the
 * module is never reported `unreachable` at a prefix it left (a long-lived client once did, while a
 * fresh one said ok).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  createMeshClient,
  issueMembership,
  type MeshClient,
  revokeMembership,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

let nats: NatsServerHandle;
before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

const answersAt = async (client: MeshClient, prefix: string): Promise<boolean> => {
  try {
    await client.connection.request(`${prefix}.tools`, undefined, { timeout: 500 });
    return true;
  } catch {
    return false;
  }
};

/**
 * Once the module answers at `prefix` and no longer at the prefix it `left`, the long-lived client's
 * `tools()` (asked first, before any catalogue read could refresh it), its call and its catalogue all
 * find it there. While the node moves, the module answers at both for a moment: CI once saw `tools()`
 * answered `ok` at the old prefix right after the new one answered.
 */
async function followsTo(client: MeshClient, prefix: string, text: string, left?: string): Promise<void> {
  await eventually(
    `the module answering at ${prefix}${left === undefined ? "" : `, not at ${left}`}`,
    async () =>
      (await answersAt(client, prefix)) && (left === undefined || !(await answersAt(client, left)))
        ? true
        : undefined,
  );
  const tools = await client.tools("moving");
  assert.equal(tools.status, "ok", `tools() after the move to ${prefix}: ${JSON.stringify(tools.errors)}`);
  assert.equal(tools.prefix, prefix);
  assert.deepEqual(await client.call("moving.echo", { text }), { ok: true, output: { text } });
  const listed = (await client.catalogue()).filter((module) => module.module === "moving");
  assert.deepEqual(
    listed.map((module) => [module.status, module.prefix]),
    [["ok", prefix]],
    "listed once, ok, at its new prefix",
  );
}

it("a long-lived client's listing and calls follow a module's prefix through issue, re-issue, revoke and issue again", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-m", nats.url, [{ module: "moving", path: fixture("alpha.ts") }]),
  });
  const client = await createMeshClient({ servers: nats.url });
  try {
    // Open mode: served at its default prefix; the client learns it there.
    await followsTo(client, "tackle.tools.moving", "open");

    await issueMembership(client.connection, { node: "node-m", module: "moving", prefix: "acme.one" });
    await followsTo(client, "acme.one", "one", "tackle.tools.moving");

    await issueMembership(client.connection, { node: "node-m", module: "moving", prefix: "acme.two" });
    await followsTo(client, "acme.two", "two", "acme.one");

    // A revoke stops serving: the module leaves the listing, and a call fails clearly, not at acme.two's ghost.
    assert.equal(await revokeMembership(client.connection, { node: "node-m", module: "moving" }), true);
    await eventually("the revoked module gone from the listing", async () =>
      (await client.catalogue()).some((module) => module.module === "moving" && module.status === "ok")
        ? undefined
        : true,
    );
    const revoked = await client.call("moving.echo", { text: "revoked" });
    assert.equal(revoked.ok, false);

    await issueMembership(client.connection, { node: "node-m", module: "moving", prefix: "acme.three" });
    await followsTo(client, "acme.three", "three");
  } finally {
    await revokeMembership(client.connection, { node: "node-m", module: "moving" }).catch(() => false);
    await client.close();
    await runtime.close();
  }
});
