/**
 * Seat subjects are held like module prefixes (ADR 0220): a seat's verbs answer on
 * `<subject>.<verb>` (`tackle.seats.<seat>` by default), so a module issued `tackle.seats.pad`, or a
 * prefix over or under a seat's subject, would answer the seat's verbs and its credential would reach
 * them. One rule over every prefix the mesh serves — a module's tools, each seat's verbs — refused at
 * issue and in credentials naming both parties; a node whose records already overlap serves the
 * earlier-issued one.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import {
  CATALOGUE_BUCKET,
  connectMesh,
  createMeshAuthority,
  issueClientCredential,
  issueMembership,
  issueNodeCredential,
  MEMBERSHIP_BUCKET,
  MeshPrefixConflictError,
  type NodeRuntime,
  openMeshBuckets,
  revokeMembership,
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

interface Party {
  readonly module: string;
  readonly seat?: string;
  readonly prefix: string;
}

/** A MeshPrefixConflictError naming the refused party and the holder, both prefixes in its message. */
function conflict(refused: Party, holder: Party) {
  return (error: unknown) => {
    assert.ok(MeshPrefixConflictError.isInstance(error), `not a MeshPrefixConflictError: ${String(error)}`);
    assert.deepEqual(
      {
        module: error.module,
        seat: error.seat,
        prefix: error.prefix,
        heldBy: error.heldBy,
        heldSeat: error.heldSeat,
        heldPrefix: error.heldPrefix,
      },
      {
        module: refused.module,
        seat: refused.seat,
        prefix: refused.prefix,
        heldBy: holder.module,
        heldSeat: holder.seat,
        heldPrefix: holder.prefix,
      },
    );
    for (const name of [
      refused.module,
      refused.prefix,
      holder.module,
      holder.prefix,
      refused.seat,
      holder.seat,
    ]) {
      if (name !== undefined && name !== "*")
        assert.ok(error.message.includes(name), `${name} not in: ${error.message}`);
    }
    return true;
  };
}

it("issuing a module prefix or a seat subject that nests with another party's is refused naming both, all four ways", async () => {
  await issueMembership(admin, { node: "node-1", module: "notes", prefix: "acme.notes", seats: ["pad"] });
  const pad = { module: "notes", seat: "pad", prefix: "tackle.seats.pad" };

  // A module on the seat's default subject, under it, or over it.
  for (const prefix of ["tackle.seats.pad", "tackle.seats.pad.x"]) {
    await assert.rejects(
      issueMembership(admin, { node: "node-2", module: "squat", prefix }),
      conflict({ module: "squat", prefix }, pad),
    );
  }
  // Every seat issued without a subject answers under tackle.seats: no module or seat may hold it.
  await assert.rejects(
    issueMembership(admin, { node: "node-2", module: "squat", prefix: "tackle.seats" }),
    conflict(
      { module: "squat", prefix: "tackle.seats" },
      { module: "*", seat: "*", prefix: "tackle.seats.<seat>" },
    ),
  );
  // A seat over a module's prefix, a seat under another seat's subject, another module's seat of the same name.
  await assert.rejects(
    issueMembership(admin, {
      node: "node-2",
      module: "editor",
      prefix: "acme.editor",
      seats: { draft: "acme" },
    }),
    conflict({ module: "editor", seat: "draft", prefix: "acme" }, { module: "notes", prefix: "acme.notes" }),
  );
  await assert.rejects(
    issueMembership(admin, {
      node: "node-2",
      module: "editor",
      prefix: "acme.editor",
      seats: { draft: "tackle.seats.pad.draft" },
    }),
    conflict({ module: "editor", seat: "draft", prefix: "tackle.seats.pad.draft" }, pad),
  );
  await assert.rejects(
    issueMembership(admin, { node: "node-2", module: "editor", prefix: "acme.editor", seats: ["pad"] }),
    /prefix tackle\.seats\.pad is already module notes's seat pad's \(node node-1's membership\)/,
  );
  // One module's own parties: a seat under its own prefix answers where its tools do.
  await assert.rejects(
    issueMembership(admin, {
      node: "node-2",
      module: "editor",
      prefix: "acme.editor",
      seats: { draft: "acme.editor.d" },
    }),
    conflict(
      { module: "editor", seat: "draft", prefix: "acme.editor.d" },
      { module: "editor", prefix: "acme.editor" },
    ),
  );
  // The seat held first refuses a module later issued over it, and a custom subject counts like a default one.
  await issueMembership(admin, {
    node: "node-2",
    module: "ledger",
    prefix: "acme.ledger",
    seats: { book: "books.main" },
  });
  await assert.rejects(
    issueMembership(admin, { node: "node-3", module: "library", prefix: "books" }),
    conflict(
      { module: "library", prefix: "books" },
      { module: "ledger", seat: "book", prefix: "books.main" },
    ),
  );
  const buckets = await openMeshBuckets(admin);
  for (const key of ["node-2.squat", "node-2.editor", "node-3.library"]) {
    assert.equal(await buckets.membership.get(key), null, `${key} written though refused`);
  }

  // The same seat of the same module on another node is the same party; a sibling subject is not nested.
  await issueMembership(admin, { node: "node-3", module: "notes", prefix: "acme.notes", seats: ["pad"] });
  await issueMembership(admin, {
    node: "node-3",
    module: "editor",
    prefix: "acme.editor",
    seats: ["padded"],
  });
});

it("no credential reaches a module and a seat whose prefixes nest, nor a module's seat under its own prefix", () => {
  const authority = createMeshAuthority();
  const notes = { module: "notes", prefix: "acme.notes", seats: { pad: "tackle.seats.pad" } };
  const squat = { module: "squat", prefix: "tackle.seats.pad" };
  const refused = conflict(
    { module: "squat", prefix: "tackle.seats.pad" },
    { module: "notes", seat: "pad", prefix: "tackle.seats.pad" },
  );
  assert.throws(() => issueNodeCredential(authority, { node: "node-1", modules: [notes, squat] }), refused);
  assert.throws(() => issueClientCredential(authority, { name: "caller", modules: [notes, squat] }), refused);
  const selfNested = { module: "editor", prefix: "acme.editor", seats: { draft: "acme.editor.draft" } };
  assert.throws(
    () => issueClientCredential(authority, { name: "caller", modules: [selfNested] }),
    conflict(
      { module: "editor", seat: "draft", prefix: "acme.editor.draft" },
      { module: "editor", prefix: "acme.editor" },
    ),
  );
});

/** Writes records as a mesh issued before ADR 0220 could hold them. */
async function writeRecord(
  node: string,
  module: string,
  prefix: string,
  seats: Record<string, string>,
  issuedAt: string,
): Promise<void> {
  const kvm = new Kvm(admin);
  await (await kvm.open(MEMBERSHIP_BUCKET)).put(
    `${node}.${module}`,
    JSON.stringify({ node, module, prefix, seats, issuedAt }),
  );
  await (await kvm.open(CATALOGUE_BUCKET)).put(
    module,
    JSON.stringify({ module, prefix, updatedAt: issuedAt }),
  );
}

/** Which module answered each of `count` appends on the seat's subject. */
async function appendAnswerers(subject: string, count: number): Promise<Set<string>> {
  const modules = new Set<string>();
  for (let index = 0; index < count; index += 1) {
    const reply = await admin.request(subject, JSON.stringify({ line: `l${index}` }), { timeout: 2000 });
    modules.add((reply.json() as { module: string }).module);
  }
  return modules;
}

function notServed(runtime: NodeRuntime, module: string): string {
  const info = runtime.modules().find((entry) => entry.module === module);
  assert.equal(info?.status, "failed", `${module} is served: ${JSON.stringify(info)}`);
  return info.errors.map((error) => error.message).join("; ");
}

/**
 * Module `keeper` holds seat `ledger` on `<root>.ledger` (verb `append` on `<root>.ledger.append`);
 * module `squat`, the same bundle, on `<root>` (tool `ledger.append` on `<root>.ledger.append`).
 */
async function overlappingNode(node: string, root: string, keeperFirst: boolean): Promise<NodeRuntime> {
  const [keeperAt, squatAt] = keeperFirst
    ? ["2026-02-01T00:00:00.000Z", "2026-02-02T00:00:00.000Z"]
    : ["2026-02-02T00:00:00.000Z", "2026-02-01T00:00:00.000Z"];
  await writeRecord(node, "keeper", `${root}-keeper`, { ledger: `${root}.ledger` }, keeperAt);
  await writeRecord(node, "squat", root, {}, squatAt);
  const runtime = await startNodeRuntime({
    config: meshConfig(node, nats.url, [
      { module: "keeper", path: fixture("beta.mjs") },
      { module: "squat", path: fixture("beta.mjs") },
    ]),
    logger: recordingLogger(),
  });
  runtimes.push(runtime);
  return runtime;
}

it("a node whose records already overlap a module and a seat serves the earlier-issued one, either way round", async () => {
  // The seat first: its verbs answer by keeper alone, and squat is refused naming the seat.
  const keeperFirst = await overlappingNode("node-k", "first", true);
  await eventually("keeper's seat answers", async () =>
    (await appendAnswerers("first.ledger.append", 1)).size ? true : undefined,
  );
  assert.deepEqual([...(await appendAnswerers("first.ledger.append", 20))], ["keeper"]);
  assert.match(
    notServed(keeperFirst, "squat"),
    /prefix first of module squat nests with prefix first\.ledger, held by module keeper's seat ledger/,
  );

  // The module first: it keeps its tools, and keeper (whose seat lies under it) is refused naming it.
  const squatFirst = await overlappingNode("node-s", "second", false);
  await eventually("squat answers", async () =>
    (await appendAnswerers("second.ledger.append", 1)).size ? true : undefined,
  );
  assert.deepEqual([...(await appendAnswerers("second.ledger.append", 20))], ["squat"]);
  assert.match(
    notServed(squatFirst, "keeper"),
    /prefix second\.ledger of module keeper's seat ledger nests with prefix second, held by module squat/,
  );
});

it("a module refused for an overlap is served once the earlier party is revoked, without a restart", async () => {
  // keeper's seat on another node (not running): squat, on node-r, yields to it.
  await writeRecord(
    "node-elsewhere",
    "keeper",
    "third-keeper",
    { ledger: "third.ledger" },
    "2026-02-01T00:00:00.000Z",
  );
  await writeRecord("node-r", "squat", "third", {}, "2026-02-02T00:00:00.000Z");
  await issueMembership(admin, { node: "node-r", module: "marker", prefix: "third-marker.v1" });
  const runtime = await startNodeRuntime({
    config: meshConfig("node-r", nats.url, [
      { module: "squat", path: fixture("beta.mjs") },
      { module: "marker", path: fixture("alpha.ts") },
    ]),
    logger: recordingLogger(),
  });
  runtimes.push(runtime);
  assert.match(notServed(runtime, "squat"), /held by module keeper's seat ledger/);
  // The runtime has followed every record written so far once marker answers where it was moved.
  await issueMembership(admin, { node: "node-r", module: "marker", prefix: "third-marker.v2" });
  await eventually("marker moved", async () => ((await answers("third-marker.v2")) ? true : undefined));
  assert.match(notServed(runtime, "squat"), /held by module keeper's seat ledger/);

  await revokeMembership(admin, { node: "node-elsewhere", module: "keeper" });
  await eventually("squat serves once keeper's seat is gone", async () =>
    runtime.modules().find((entry) => entry.module === "squat")?.status === "ok" ? true : undefined,
  );
  assert.deepEqual([...(await appendAnswerers("third.ledger.append", 10))], ["squat"]);
});

async function answers(prefix: string): Promise<boolean> {
  try {
    await admin.request(`${prefix}.tools`, undefined, { timeout: 500 });
    return true;
  } catch {
    return false;
  }
}
