/**
 * Where a node serves each of its modules: the placement its membership record gives (or the default
 * prefix in open mode), re-served when the record changes, and refused when another bundle has the
 * module's name on the mesh.
 */
import type { KvWatchEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@tackle/core";
import type { LoadedModule } from "../bundles/load-modules.ts";
import { defaultModulePrefix } from "../config/names.ts";
import { describePrefixConflict } from "../errors/mesh-prefix-conflict-error.ts";
import {
  listMemberships,
  type MeshBuckets,
  noteBundle,
  readCatalogue,
} from "../membership/membership-store.ts";
import { findConflictAmong, partiesOf } from "../membership/prefix-overlap.ts";
import {
  checkMembership,
  MEMBERSHIP_BUCKET,
  type MembershipRecord,
  membershipKey,
} from "../membership/records.ts";
import { decodeJson } from "../nats/wire.ts";
import type { Admission } from "./admission.ts";
import type { CallLedger } from "./call-ledger.ts";
import type { ModuleInfo } from "./module-info.ts";
import type { ResultsLedger } from "./results-ledger.ts";
import { type Placement, type ServedModule, serveModule } from "./serve-module.ts";

export interface ModuleSlot {
  readonly loaded: LoadedModule;
  served: ServedModule | undefined;
  revision: number;
  /** Re-serves of one module run one at a time, in order. */
  queue: Promise<void>;
  /** Its calls in flight across placements, aborted on close. */
  readonly running: Map<string, AbortController>;
  /** What its finished and disowned calls were, across placements (ADR 0208). */
  readonly ledger: CallLedger;
  /** Its results by idempotency key, across its nodes (ADR 0210). */
  readonly results: ResultsLedger;
  /** How many of its calls run at once and wait on this node, across placements (ADR 0214). */
  readonly admission: Admission;
  /** Why it is not served (not issued to this node, or refused); undefined while it serves. */
  notServed?: string | undefined;
  /** Refused because a prefix of another party's nests with its own: placed again when any membership changes. */
  overlapRefused?: boolean;
}

/** What placing a module needs of the node runtime: its connection, its modules and its mode. */
export interface PlacementSite {
  readonly connection: NatsConnection;
  readonly node: string;
  readonly logger: Logger;
  /** This runtime's id in its answers to callers asking which calls it holds. */
  readonly instance: string;
  readonly slots: ReadonlyMap<string, ModuleSlot>;
  readonly buckets: MeshBuckets;
  /** Whether the node serves only what it is issued (false in open mode, until its first membership). */
  gated: boolean;
}

/** A membership record as the bucket gives it, or null for none. */
export type MembershipEntry = KvWatchEntry | { json<T>(): T; key: string } | null;

/**
 * Serves a module where its record puts it: the new placement answers before the old one stops.
 * Without a record it serves on its default prefix in open mode, and not at all otherwise.
 */
export async function placeModule(
  site: PlacementSite,
  slot: ModuleSlot,
  entry: MembershipEntry,
  revision: number,
): Promise<void> {
  const { connection, node, logger } = site;
  const module = slot.loaded.module;
  let placement: Placement = { prefix: defaultModulePrefix(module), seats: {} };
  let record: MembershipRecord | undefined;
  if (entry !== null) {
    try {
      record = checkMembership(entry.json(), `${MEMBERSHIP_BUCKET}/${entry.key}`);
      placement = { prefix: record.prefix, seats: record.seats };
    } catch (error) {
      logger.error("membership record refused; the module keeps its current placement", {
        module,
        error: (error as Error).message,
      });
      return;
    }
    if (!site.gated) endOpenMode(site, slot);
  } else if (site.gated) {
    await stopServing(
      site,
      slot,
      `not issued to node ${node}: not served (tackle mesh issue ${node} ${module})`,
    );
    return;
  }
  const previous = slot.served;
  if (previous !== undefined && samePlacement(previous.placement, placement)) return;
  const nested = await nestedPrefix(site, module, placement, record);
  slot.overlapRefused = nested !== undefined;
  if (nested !== undefined) {
    // Placed again on every membership change while refused: logged when the reason is new, not each time.
    if (slot.notServed !== nested) {
      logger.error("module refused: its prefix or a seat's nests with another party's", {
        module,
        reason: nested,
      });
    }
    await stopServing(site, slot, nested);
    return;
  }
  const refused = await refusal(site, slot, placement.prefix, entry !== null);
  if (refused !== undefined) {
    logger.error("module refused: another bundle serves it on the mesh", { module, reason: refused });
    await noteBundle(connection, module, {
      refusedNode: node,
      refusedDigest: slot.loaded.digest,
    }).catch(() => undefined);
    await stopServing(site, slot, refused);
    return;
  }
  try {
    slot.served = await serveModule(connection, slot.loaded, placement, {
      node,
      logger,
      running: slot.running,
      instance: site.instance,
      ledger: slot.ledger,
      admission: slot.admission,
      ...(slot.results === undefined ? {} : { results: slot.results }),
    });
    slot.notServed = undefined;
    slot.revision = Math.max(slot.revision, revision);
    logger.info(previous === undefined ? "serving module" : "re-serving module on its new membership", {
      module,
      prefix: placement.prefix,
      seats: placement.seats,
      digest: slot.loaded.digest,
    });
  } catch (error) {
    logger.error("could not serve module", { module, error: (error as Error).message });
    return;
  }
  await previous?.stop();
  if (entry !== null) {
    await noteBundle(connection, module, { digest: slot.loaded.digest }).catch(() => undefined);
  }
}

/** The node's first membership: from now on it serves only what it is issued, so the others are placed again. */
function endOpenMode(site: PlacementSite, issued: ModuleSlot): void {
  site.gated = true;
  site.logger.info("membership issued to this node: open mode ends; serving only issued modules", {
    node: site.node,
  });
  for (const other of site.slots.values()) {
    if (other === issued) continue;
    other.queue = other.queue.then(async () => {
      const held = await site.buckets.membership.get(membershipKey(site.node, other.loaded.module));
      if (held === undefined || held === null || held.operation !== "PUT") {
        await placeModule(site, other, null, other.revision);
      }
    });
  }
}

async function stopServing(site: PlacementSite, slot: ModuleSlot, reason: string): Promise<void> {
  const served = slot.served;
  slot.served = undefined;
  slot.notServed = reason;
  if (served !== undefined) {
    await served.stop();
    site.logger.info("stopped serving module", { module: slot.loaded.module, reason });
  }
}

/**
 * Why this node must not serve the module: the catalogue (for an issued module) or the node
 * answering for it now (open mode) has another bundle under the same name. Never merged.
 */
async function refusal(
  site: PlacementSite,
  slot: ModuleSlot,
  prefix: string,
  issued: boolean,
): Promise<string | undefined> {
  const { connection } = site;
  const { module, digest } = slot.loaded;
  let theirs: string | undefined;
  let holder = "";
  if (issued) {
    const record = (await readCatalogue(connection, { onInvalid: () => {} }).catch(() => [])).find(
      (entry) => entry.module === module,
    );
    theirs = record?.digest;
    holder = "the mesh's catalogue";
  }
  if (theirs === undefined) {
    try {
      const reply = await connection.request(`${prefix}.tools`, undefined, { timeout: 300 });
      const info = decodeJson(reply.data) as ModuleInfo | undefined;
      if (info?.node !== site.node && typeof info?.digest === "string") {
        theirs = info.digest;
        holder = `node ${info.node}`;
      }
    } catch {
      // Nobody answers for it: nothing to compare with.
    }
  }
  if (theirs === undefined || theirs === digest) return undefined;
  return `refused: ${holder} has module ${module} as bundle ${theirs}, but this node's bundle is ${digest}; serve the same bundle, or revoke the module on every node to change it`;
}

/**
 * Why this node must not serve the module where `placement` puts it (ADRs 0219, 0220): its tools' or
 * a seat's prefix nests with one another party (a module's tools, a seat's verbs) holds in any node's
 * membership, or two of its own nest. Of two records the one issued later yields (what
 * `issueMembership` would have refused), so every node refuses the same one; open mode yields to any
 * issued party. A membership that cannot be read leaves the module served, with a warning.
 */
async function nestedPrefix(
  site: PlacementSite,
  module: string,
  placement: Placement,
  record: MembershipRecord | undefined,
): Promise<string | undefined> {
  let held: MembershipRecord[];
  try {
    held = await listMemberships(site.connection, {}, { onInvalid: () => {} });
  } catch (error) {
    site.logger.warn("could not read the memberships to check the module's prefix against them", {
      module,
      error: (error as Error)?.message,
    });
    return undefined;
  }
  const ownKey = membershipKey(site.node, module);
  const earlier = held.filter(
    (other) =>
      membershipKey(other.node, other.module) !== ownKey &&
      (record === undefined || issuedBefore(other, record)),
  );
  const conflict = findConflictAmong(
    partiesOf({ module, ...placement }),
    earlier.flatMap((other) =>
      partiesOf(other, `node ${other.node}'s membership, issued ${other.issuedAt || "earlier"}`),
    ),
    `node ${site.node}'s own membership`,
  );
  if (conflict === undefined) return undefined;
  return `refused: ${describePrefixConflict(conflict)}; not served until one of them is revoked or moved (then it is served at once)`;
}

/** The order every node agrees on: issued earlier, then by module name, then by node name. */
function issuedBefore(left: MembershipRecord, right: MembershipRecord): boolean {
  if (left.issuedAt !== right.issuedAt) return left.issuedAt < right.issuedAt;
  if (left.module !== right.module) return left.module < right.module;
  return left.node < right.node;
}

function samePlacement(left: Placement, right: Placement): boolean {
  return (
    left.prefix === right.prefix && JSON.stringify(sorted(left.seats)) === JSON.stringify(sorted(right.seats))
  );
}

function sorted(record: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(record).sort(([left], [right]) => left.localeCompare(right));
}
