/**
 * A seat is a name a caller calls (`callSeat(seat, verb)`), so it answers for one module (ADR 0224).
 * Before, two modules could hold seats of one name on subjects that do not nest, and `callSeat` sent
 * to whichever record it listed first. Over a real nats-server: issuing a seat another module holds is
 * refused naming the holder, and a mesh whose records already give one seat to two modules answers
 * `ambiguous_seat` rather than choosing.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  connectMesh,
  createMeshClient,
  issueMembership,
  MEMBERSHIP_BUCKET,
  type MeshClient,
  MeshSeatTakenError,
  openMeshBuckets,
  revokeMembership,
} from "../src/index.ts";

let nats: NatsServerHandle;
let admin: NatsConnection;
let client: MeshClient;
before(async () => {
  nats = await startNatsServer();
  admin = await connectMesh({ servers: nats.url });
  client = await createMeshClient({ servers: nats.url, timeoutMs: 5000 });
});
after(async () => {
  await client?.close();
  await admin?.drain();
  await nats?.close();
});

it("refuses a seat another module holds, on any subject, naming the holder; the same module may hold it on another node", async () => {
  await issueMembership(admin, { node: "node-1", module: "notes", prefix: "acme.notes", seats: ["pad"] });
  for (const seats of [{ pad: "acme.editor-pad" }, { draft: "acme.draft", pad: "elsewhere.pad" }]) {
    await assert.rejects(
      issueMembership(admin, { node: "node-2", module: "editor", prefix: "acme.editor", seats }),
      (error: unknown) => {
        assert.ok(MeshSeatTakenError.isInstance(error), String(error));
        assert.deepEqual(
          { module: error.module, seat: error.seat, heldBy: error.heldBy, code: error.code },
          { module: "editor", seat: "pad", heldBy: "notes", code: "invalid_mesh_config" },
        );
        assert.match(
          error.message,
          /seat pad of module editor is already held by module notes \(node node-1's membership\)/,
        );
        return true;
      },
    );
  }
  const buckets = await openMeshBuckets(admin);
  assert.equal(await buckets.membership.get("node-2.editor"), null, "written though refused");

  // The seat's own module, on another node or issued again on its node, is the same holder.
  await issueMembership(admin, { node: "node-2", module: "notes", prefix: "acme.notes", seats: ["pad"] });
  await issueMembership(admin, { node: "node-1", module: "notes", prefix: "acme.notes", seats: ["pad"] });
  // Once every node's record of it is revoked, another module may take the seat.
  await revokeMembership(admin, { node: "node-1", module: "notes" });
  await assert.rejects(
    issueMembership(admin, {
      node: "node-3",
      module: "editor",
      prefix: "acme.editor",
      seats: { pad: "acme.editor-pad" },
    }),
    /held by module notes \(node node-2's membership\)/,
  );
  await revokeMembership(admin, { node: "node-2", module: "notes" });
  await issueMembership(admin, { node: "node-3", module: "editor", prefix: "acme.editor", seats: ["pad"] });
});

it("answers ambiguous_seat, sending nothing, when records issued before the rule give one seat to two modules", async () => {
  const kvm = new Kvm(admin);
  const membership = await kvm.open(MEMBERSHIP_BUCKET);
  const issuedAt = "2026-02-01T00:00:00.000Z";
  for (const [node, module, subject] of [
    ["node-a", "keeper", "keeper.book"],
    ["node-b", "squat", "squat.book"],
  ] as const) {
    const seats = { book: subject };
    await membership.put(
      `${node}.${module}`,
      JSON.stringify({ node, module, prefix: module, seats, issuedAt }),
    );
  }
  // Nothing may answer: a call sent to either subject would be seen here.
  const seen: string[] = [];
  const watch = admin.subscribe("*.book.>", {
    callback: (_error, message) => {
      seen.push(message.subject);
    },
  });
  const result = await client.callSeat("book", "append", { line: "x" });
  assert.equal(result.ok, false);
  assert.equal(!result.ok && result.error.code, "ambiguous_seat");
  assert.equal(!result.ok && result.error.retryable, false);
  assert.deepEqual(!result.ok && result.error.data, {
    seat: "book",
    verb: "append",
    modules: ["keeper", "squat"],
  });
  await admin.flush();
  watch.unsubscribe();
  assert.deepEqual(seen, []);

  // With one holder left, the seat is called again (nothing serves it here: the verb is unknown).
  await membership.delete("node-b.squat");
  const alone = await client.callSeat("book", "append", { line: "x" });
  assert.equal(!alone.ok && alone.error.code, "unknown_tool", JSON.stringify(alone));
});
