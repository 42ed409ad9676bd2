/** The membership and catalogue records in NATS KV (ADR 0201): bucket names, keys and shapes. */

import { moduleNamePattern, nodeNamePattern, subjectPrefixPattern } from "../config/names.ts";
import { MeshConfigError } from "../errors/mesh-config-error.ts";

/** Bucket of what the mesh issued each module on each node; key `<node>.<module>`. */
export const MEMBERSHIP_BUCKET = "tackle-mesh-membership";
/** Bucket of the modules the mesh holds; key `<module>`. */
export const CATALOGUE_BUCKET = "tackle-mesh-catalogue";

/** What the mesh issued one module on one node. */
export interface MembershipRecord {
  readonly node: string;
  readonly module: string;
  /** The subject prefix its tools answer on: `<prefix>.<tool>`, and `<prefix>.tools` for the listing. */
  readonly prefix: string;
  /** The seats it holds here, each to the subject prefix its verbs answer on: `<subject>.<verb>`. */
  readonly seats: Readonly<Record<string, string>>;
  readonly issuedAt: string;
}

/** A module the mesh holds. */
export interface CatalogueRecord {
  readonly module: string;
  /** Where clients find its tools. */
  readonly prefix: string;
  readonly description?: string;
  /** The bundle identity (`sha256:…`) of the first node that served it; others must match it. */
  readonly digest?: string;
  /** Nodes refused for offering another bundle under this module, with their digest. */
  readonly refused?: Readonly<Record<string, { readonly digest: string; readonly at: string }>>;
  readonly updatedAt: string;
}

export const seatNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

export function membershipKey(node: string, module: string): string {
  return `${node}.${module}`;
}

/** Checks a record read from (or about to be written to) the bucket; a bad one is refused by name. */
export function checkMembership(value: unknown, where: string): MembershipRecord {
  const record = value as Partial<MembershipRecord> | null;
  const fail = (message: string) => new MeshConfigError(where, message);
  if (typeof record !== "object" || record === null) throw fail("a membership record must be a JSON object");
  if (typeof record.node !== "string" || !nodeNamePattern.test(record.node))
    throw fail(`bad node ${JSON.stringify(record.node)}`);
  if (typeof record.module !== "string" || !moduleNamePattern.test(record.module)) {
    throw fail(`bad module ${JSON.stringify(record.module)} (^[A-Za-z0-9_-]{1,64}$)`);
  }
  if (typeof record.prefix !== "string" || !subjectPrefixPattern.test(record.prefix)) {
    throw fail(`bad subject prefix ${JSON.stringify(record.prefix)} (dot-separated tokens, no wildcards)`);
  }
  const seats = record.seats ?? {};
  if (typeof seats !== "object" || seats === null || Array.isArray(seats))
    throw fail("seats must map seat names to subject prefixes");
  for (const [seat, subject] of Object.entries(seats)) {
    if (!seatNamePattern.test(seat))
      throw fail(`bad seat name ${JSON.stringify(seat)} (^[A-Za-z0-9_-]{1,64}$)`);
    if (typeof subject !== "string" || !subjectPrefixPattern.test(subject)) {
      throw fail(`seat ${seat}: bad subject prefix ${JSON.stringify(subject)}`);
    }
  }
  return {
    node: record.node,
    module: record.module,
    prefix: record.prefix,
    seats: { ...seats },
    issuedAt: typeof record.issuedAt === "string" ? record.issuedAt : "",
  };
}
