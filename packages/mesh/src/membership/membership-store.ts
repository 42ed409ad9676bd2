/**
 * Library functions over the membership and catalogue buckets: what a controller (or `tackle mesh
 * issue|revoke|ls`) uses to tell runtimes what to serve. Runtimes follow the membership bucket live.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ToolAbortedError } from "@tackle/core";
import { untilAborted } from "../client/until-aborted.ts";
import { defaultModulePrefix, defaultSeatPrefix } from "../config/names.ts";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { MeshSeatTakenError } from "../errors/mesh-seat-taken-error.ts";
import {
  type BucketSnapshot,
  readCatalogueSnapshot,
  readMembershipSnapshot,
  untilWritten,
  writeIfUnchanged,
} from "./membership-snapshot.ts";
import { type HeldPrefix, partiesOf, refuseNestedPrefix } from "./prefix-overlap.ts";
import {
  CATALOGUE_BUCKET,
  type CatalogueRecord,
  checkMembership,
  MEMBERSHIP_BUCKET,
  type MembershipRecord,
  membershipKey,
} from "./records.ts";

/**
 * Every function here takes an optional `signal`. A read aborted mid-wait rejects with `aborted` at
 * once (its JetStream request ends by its own 5 s); a write honours the signal until it writes, then
 * finishes; aborted before the call, nothing is sent.
 */
interface Abortable {
  readonly signal?: AbortSignal | undefined;
}

function checkAborted(signal: AbortSignal | undefined, name: string): void {
  if (signal?.aborted) throw new ToolAbortedError(name, signal.reason);
}

export interface MeshBuckets {
  readonly membership: KV;
  readonly catalogue: KV;
}

/**
 * Opens both buckets, creating them (one value per key, file storage) when missing. On a NATS
 * cluster, create them once with `replicas: 3` so they survive the loss of one server; opening an
 * existing bucket keeps its replication whatever `replicas` says.
 */
export async function openMeshBuckets(
  connection: NatsConnection,
  options: { readonly replicas?: number } & Abortable = {},
): Promise<MeshBuckets> {
  checkAborted(options.signal, "mesh.openMeshBuckets");
  const kvm = new Kvm(connection);
  const replicas = options.replicas ?? 1;
  const [membership, catalogue] = await Promise.all([
    kvm.create(MEMBERSHIP_BUCKET, {
      history: 1,
      replicas,
      description: "tackle mesh: what each module was issued on each node",
    }),
    kvm.create(CATALOGUE_BUCKET, {
      history: 1,
      replicas,
      description: "tackle mesh: the modules the mesh holds",
    }),
  ]);
  return { membership, catalogue };
}

export interface IssueMembershipOptions {
  readonly node: string;
  readonly module: string;
  /** Default `tackle.tools.<module>`. */
  readonly prefix?: string;
  /** Seat names, each to its subject prefix; `undefined` subject means `tackle.seats.<seat>`. */
  readonly seats?: Readonly<Record<string, string | undefined>> | readonly string[];
  readonly description?: string;
  readonly signal?: AbortSignal | undefined;
}

/** Issues (or re-issues) a module on a node, and lists the module in the catalogue. Runtimes re-serve at once. */
export async function issueMembership(
  connection: NatsConnection,
  options: IssueMembershipOptions,
): Promise<MembershipRecord> {
  const seatsGiven = options.seats ?? {};
  const seatEntries: [string, string | undefined][] = Array.isArray(seatsGiven)
    ? seatsGiven.map((seat) => [seat, undefined])
    : Object.entries(seatsGiven);
  const record = checkMembership(
    {
      node: options.node,
      module: options.module,
      prefix: options.prefix ?? defaultModulePrefix(options.module),
      seats: Object.fromEntries(
        seatEntries.map(([seat, subject]) => [seat, subject ?? defaultSeatPrefix(seat)]),
      ),
      issuedAt: "",
    },
    "membership",
  );
  checkAborted(options.signal, "mesh.issueMembership");
  const buckets = await openMeshBuckets(connection);
  const key = membershipKey(record.node, record.module);
  // Two parties (a module's tools, a seat's verbs) on prefixes that nest would answer each other's
  // subjects (ADRs 0219, 0220): checked against the catalogue and every node's membership, stale ones
  // included, and written only if no other write landed since the read (ADR 0221), else read again.
  let memberships: BucketSnapshot<MembershipRecord> | undefined;
  let catalogued: BucketSnapshot<CatalogueRecord> | undefined;
  const issued = await untilWritten("mesh.issueMembership", options.signal, async () => {
    // Stamped at each attempt: `issuedAt` orders a pair that nests anyway (ADR 0219), so it is when it was written.
    const stamped: MembershipRecord = { ...record, issuedAt: new Date().toISOString() };
    // The memberships first, then the catalogue: a prefix the catalogue kept after its membership was
    // revoked was written there before the revoke, so before this read (ADR 0221).
    memberships = await untilAborted(
      readMembershipSnapshot(connection, memberships),
      options.signal,
      "mesh.issueMembership",
    );
    catalogued = await untilAborted(
      readCatalogueSnapshot(connection, catalogued),
      options.signal,
      "mesh.issueMembership",
    );
    const held = heldPrefixes([...catalogued.records.values()], [...memberships.records.values()], key);
    refuseNestedPrefix("membership", partiesOf(stamped), held, "the same issue");
    refuseTakenSeat(stamped, [...memberships.records.values()], key);
    // From the write on, the issue finishes: a half-issued module would be served without its catalogue entry.
    checkAborted(options.signal, "mesh.issueMembership");
    const written = await writeIfUnchanged(connection, key, JSON.stringify(stamped), memberships.sequence);
    return written ? stamped : undefined;
  });
  // The bundle identity the mesh already knows for the module stays: issuing a node does not reset it.
  const previous = (await readCatalogue(connection, { onInvalid: () => {} })).find(
    (entry) => entry.module === issued.module,
  );
  const catalogue: CatalogueRecord = {
    module: issued.module,
    prefix: issued.prefix,
    ...(options.description === undefined ? {} : { description: options.description }),
    ...(previous?.digest === undefined ? {} : { digest: previous.digest }),
    ...(previous?.refused === undefined ? {} : { refused: previous.refused }),
    updatedAt: issued.issuedAt,
  };
  await buckets.catalogue.put(issued.module, JSON.stringify(catalogue));
  return issued;
}

/**
 * A seat another module holds on any node (the record being replaced aside): `callSeat` names a seat,
 * not a module, so two holders would leave a call to either (ADR 0224).
 */
function refuseTakenSeat(
  record: MembershipRecord,
  memberships: readonly MembershipRecord[],
  replacing: string,
): void {
  for (const seat of Object.keys(record.seats)) {
    const holder = memberships.find(
      (entry) =>
        entry.module !== record.module &&
        membershipKey(entry.node, entry.module) !== replacing &&
        Object.hasOwn(entry.seats, seat),
    );
    if (holder === undefined) continue;
    throw new MeshSeatTakenError("membership", {
      module: record.module,
      seat,
      heldBy: holder.module,
      heldWhere: `node ${holder.node}'s membership`,
    });
  }
}

/**
 * Every prefix the mesh's records hold: each module's catalogue prefix, and each node's membership
 * (its tools and its seats) but the one at `replacing`, which the issue overwrites.
 */
function heldPrefixes(
  catalogue: readonly CatalogueRecord[],
  memberships: readonly MembershipRecord[],
  replacing: string,
): HeldPrefix[] {
  return [
    ...catalogue.map((entry) => ({ module: entry.module, prefix: entry.prefix, where: "the catalogue" })),
    ...memberships
      .filter((entry) => membershipKey(entry.node, entry.module) !== replacing)
      .flatMap((entry) => partiesOf(entry, `node ${entry.node}'s membership`)),
  ];
}

/**
 * Takes a module's membership off a node (its runtime stops serving it, ADR 0206);
 * the catalogue drops the module when no node holds it any more. True when there was one.
 */
export async function revokeMembership(
  connection: NatsConnection,
  options: { readonly node: string; readonly module: string } & Abortable,
): Promise<boolean> {
  checkAborted(options.signal, "mesh.revokeMembership");
  const buckets = await openMeshBuckets(connection);
  const key = membershipKey(options.node, options.module);
  const existing = await untilAborted(buckets.membership.get(key), options.signal, "mesh.revokeMembership");
  if (existing === null || existing.operation !== "PUT") return false;
  checkAborted(options.signal, "mesh.revokeMembership");
  await buckets.membership.delete(key);
  // A record that does not parse still marks a node as holding the module: the catalogue keeps it.
  let unreadable = 0;
  const remaining = await listMemberships(
    connection,
    { module: options.module },
    { onInvalid: () => (unreadable += 1) },
  );
  if (remaining.length === 0 && unreadable === 0) await buckets.catalogue.delete(options.module);
  return true;
}

/** Every live membership, optionally narrowed to a node or a module. Reading never creates the buckets. */
export async function listMemberships(
  connection: NatsConnection,
  filter: { readonly node?: string; readonly module?: string } = {},
  options: {
    /** Called for a record that does not parse; without it, such a record throws naming its key. */
    readonly onInvalid?: (key: string, error: MeshConfigError) => void;
  } & Abortable = {},
): Promise<MembershipRecord[]> {
  checkAborted(options.signal, "mesh.listMemberships");
  return untilAborted(readMemberships(connection, filter, options), options.signal, "mesh.listMemberships");
}

async function readMemberships(
  connection: NatsConnection,
  filter: { readonly node?: string; readonly module?: string },
  options: { readonly onInvalid?: (key: string, error: MeshConfigError) => void } & Abortable,
): Promise<MembershipRecord[]> {
  const records: MembershipRecord[] = [];
  const bucket = await new Kvm(connection).open(MEMBERSHIP_BUCKET);
  await whenBucketExists(async () => {
    const keys = await bucketKeys(
      connection,
      MEMBERSHIP_BUCKET,
      `${filter.node ?? "*"}.${filter.module ?? "*"}`,
    );
    for (const key of keys) {
      if (options.signal?.aborted) return;
      const entry = await bucket.get(key);
      if (entry === null || entry.operation !== "PUT") continue;
      try {
        let value: unknown;
        try {
          value = entry.json();
        } catch (error) {
          throw new MeshConfigError(`${MEMBERSHIP_BUCKET}/${key}`, "is not JSON", { cause: error });
        }
        records.push(checkMembership(value, `${MEMBERSHIP_BUCKET}/${key}`));
      } catch (error) {
        if (options.onInvalid === undefined || !MeshConfigError.isInstance(error)) throw error;
        options.onInvalid(key, error);
      }
    }
  });
  return records.sort((left, right) =>
    membershipKey(left.node, left.module).localeCompare(membershipKey(right.node, right.module)),
  );
}

/** The modules the mesh holds. Reading never creates the bucket. */
export async function readCatalogue(
  connection: NatsConnection,
  options: {
    /** Called for a record that is not a catalogue record; without it, such a record throws naming its key. */
    readonly onInvalid?: (key: string, error: MeshConfigError) => void;
  } & Abortable = {},
): Promise<CatalogueRecord[]> {
  checkAborted(options.signal, "mesh.readCatalogue");
  return untilAborted(readCatalogueRecords(connection, options), options.signal, "mesh.readCatalogue");
}

async function readCatalogueRecords(
  connection: NatsConnection,
  options: { readonly onInvalid?: (key: string, error: MeshConfigError) => void } & Abortable,
): Promise<CatalogueRecord[]> {
  const records: CatalogueRecord[] = [];
  const bucket = await new Kvm(connection).open(CATALOGUE_BUCKET);
  await whenBucketExists(async () => {
    for (const key of await bucketKeys(connection, CATALOGUE_BUCKET)) {
      if (options.signal?.aborted) return;
      const entry = await bucket.get(key);
      if (entry === null || entry.operation !== "PUT") continue;
      let record: CatalogueRecord | undefined;
      try {
        record = entry.json<CatalogueRecord>();
      } catch {
        // Not JSON: reported below like a record of the wrong shape.
      }
      if (typeof record?.module === "string" && typeof record.prefix === "string") {
        records.push(record);
        continue;
      }
      const error = new MeshConfigError(
        `${CATALOGUE_BUCKET}/${key}`,
        "is not a catalogue record ({ module, prefix, ... } as JSON)",
      );
      if (options.onInvalid === undefined) throw error;
      options.onInvalid(key, error);
    }
  });
  return records.sort((left, right) => left.module.localeCompare(right.module));
}

/**
 * The keys a bucket holds (deleted ones included; the caller's `get` skips them), read from the
 * stream's subject counts in one request. Not `KV.keys()`: that iterator ends on a consumer's
 * pending count or idle heartbeat, and a write landing while it reads can leave it waiting for the
 * heartbeat (seconds) — long enough to stall a re-serve or a call's prefix lookup.
 */
async function bucketKeys(connection: NatsConnection, bucket: string, filter = ">"): Promise<string[]> {
  const subjectPrefix = `$KV.${bucket}.`;
  const manager = await jetstreamManager(connection);
  const info = await manager.streams.info(`KV_${bucket}`, { subjects_filter: `${subjectPrefix}${filter}` });
  return Object.keys(info.state.subjects ?? {})
    .map((subject) => subject.slice(subjectPrefix.length))
    .sort();
}

/** A bucket nobody created yet reads as empty; every other failure is the caller's to see. */
async function whenBucketExists(read: () => Promise<void>): Promise<void> {
  try {
    await read();
  } catch (error) {
    if (
      (error as Error)?.name === "StreamNotFoundError" ||
      /stream not found/i.test((error as Error)?.message)
    )
      return;
    throw error;
  }
}

/**
 * Records what a runtime found about a module's bundle in its catalogue record: the digest when the
 * record has none yet, or a refused node. Compare-and-set, so two runtimes never overwrite each other;
 * a module without a catalogue record (never issued) is left alone. Returns the record's digest.
 */
export async function noteBundle(
  connection: NatsConnection,
  module: string,
  change: { readonly digest: string } | { readonly refusedNode: string; readonly refusedDigest: string },
): Promise<string | undefined> {
  const bucket = await new Kvm(connection).open(CATALOGUE_BUCKET);
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const entry = await bucket.get(module).catch(() => null);
    if (entry === null || entry.operation !== "PUT") return undefined;
    let record: CatalogueRecord;
    try {
      record = entry.json<CatalogueRecord>();
    } catch {
      return undefined;
    }
    let next: CatalogueRecord;
    if ("digest" in change) {
      if (record.digest !== undefined) return record.digest;
      next = { ...record, digest: change.digest, updatedAt: new Date().toISOString() };
    } else {
      next = {
        ...record,
        refused: {
          ...record.refused,
          [change.refusedNode]: { digest: change.refusedDigest, at: new Date().toISOString() },
        },
        updatedAt: new Date().toISOString(),
      };
    }
    try {
      await bucket.update(module, JSON.stringify(next), entry.revision);
      return next.digest;
    } catch {
      // Another runtime wrote first: read again.
    }
  }
  return undefined;
}
