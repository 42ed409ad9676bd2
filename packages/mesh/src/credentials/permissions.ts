/**
 * The NATS permissions a mesh credential carries (ADR 0209): a node's reach exactly its modules'
 * subjects, a client's exactly the modules it names; JetStream reads of the mesh's buckets for both,
 * and writes only where a role needs them. Pure data, so it is tested without a server.
 */
import { CATALOGUE_BUCKET, MEMBERSHIP_BUCKET } from "../membership/records.ts";
import { SERVING_VERB } from "../nats/wire.ts";

/** A module as a credential sees it: where its tools and its seats' verbs answer. */
export interface ModuleReach {
  readonly module: string;
  readonly prefix: string;
  /** Seat names to subject prefixes. */
  readonly seats?: Readonly<Record<string, string>>;
}

export interface SubjectPermissions {
  readonly pub: { readonly allow: readonly string[]; readonly deny: readonly string[] };
  readonly sub: { readonly allow: readonly string[]; readonly deny: readonly string[] };
  /** Replies to requests it received (its tools' answers), one per request within the window. */
  readonly resp?: { readonly max: number; readonly ttl: number };
}

/** Each module's results ledger (ADR 0210): a bucket of its own, so a credential reaches only its module's. */
export function resultsBucket(module: string): string {
  return `tackle-mesh-results-${module}`;
}

/** The events of a call to a module go to `<prefix>.tools.events.<caller's inbox prefix>.…`. */
export const EVENTS_VERB = "tools.events";

/** A credential's own inbox prefix: one token, so its subscription permission names only its replies. */
export function inboxPrefixFor(userPublicKey: string): string {
  return `_INBOX_${userPublicKey.slice(1, 21)}`;
}

/** JetStream API subjects that read a bucket: its stream's info, direct and stored gets, a watch's consumer. */
function bucketReads(bucket: string): string[] {
  const stream = `KV_${bucket}`;
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.*`,
    `$JS.API.CONSUMER.DELETE.${stream}.*`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.*`,
    `$JS.FC.${stream}.>`,
  ];
}

/** Reads common to every mesh credential: the account's JetStream info, stream names, both mesh buckets. */
function meshReads(): string[] {
  return [
    "$JS.API.INFO",
    "$JS.API.STREAM.NAMES",
    ...bucketReads(MEMBERSHIP_BUCKET),
    ...bucketReads(CATALOGUE_BUCKET),
  ];
}

/**
 * A node serving `modules`: subscribes to their tool and seat subjects and their services-API
 * subjects, answers requests (`resp`), publishes call events into their events subjects, keeps each
 * module's results ledger, and notes each module's bundle identity in its catalogue record. It reads
 * the memberships (it follows them) and never writes them.
 */
export function nodePermissions(modules: readonly ModuleReach[], inboxPrefix: string): SubjectPermissions {
  const pub = [...meshReads(), `${inboxPrefix}.>`];
  const sub = [`${inboxPrefix}.>`, "$SRV.PING", "$SRV.INFO", "$SRV.STATS"];
  for (const reach of modules) {
    const ledger = resultsBucket(reach.module);
    pub.push(
      // Events of its own calls; its own module's listing (whether another node already serves
      // another bundle) and alive probes (a results ledger taking over a dead node's key).
      `${reach.prefix}.${EVENTS_VERB}.>`,
      `${reach.prefix}.tools`,
      `${reach.prefix}.tools.alive.*`,
      // Its announcement as it starts serving (ADR 0225).
      `${reach.prefix}.${SERVING_VERB}`,
      `$KV.${CATALOGUE_BUCKET}.${reach.module}`,
      `$JS.API.STREAM.CREATE.KV_${ledger}`,
      `$JS.API.STREAM.UPDATE.KV_${ledger}`,
      `$KV.${ledger}.>`,
      ...bucketReads(ledger),
    );
    sub.push(`${reach.prefix}.>`, `$SRV.*.${reach.module}`, `$SRV.*.${reach.module}.*`);
    for (const seatPrefix of Object.values(reach.seats ?? {})) sub.push(`${seatPrefix}.>`);
  }
  return {
    pub: { allow: unique(pub), deny: [] },
    sub: { allow: unique(sub), deny: [] },
    resp: { max: 1, ttl: 0 },
  };
}

/**
 * A client that calls `modules`: publishes to their tool and seat subjects (never their events
 * subjects nor their nodes' announcements, which only their nodes write), subscribes to its own
 * inbox, its own events subjects and the announcements, asks the services API who is there, and reads
 * the mesh's buckets.
 */
export function clientPermissions(modules: readonly ModuleReach[], inboxPrefix: string): SubjectPermissions {
  const pub = [...meshReads(), "$SRV.INFO", "$SRV.PING"];
  const deny: string[] = [];
  const sub = [`${inboxPrefix}.>`];
  for (const reach of modules) {
    pub.push(`${reach.prefix}.>`);
    // The nodes' announcements are read, never written: only a node of the module makes one (ADR 0225).
    deny.push(`${reach.prefix}.${EVENTS_VERB}.>`, `${reach.prefix}.${SERVING_VERB}`);
    sub.push(`${reach.prefix}.${EVENTS_VERB}.${inboxPrefix}.>`, `${reach.prefix}.${SERVING_VERB}`);
    for (const seatPrefix of Object.values(reach.seats ?? {})) pub.push(`${seatPrefix}.>`);
  }
  return { pub: { allow: unique(pub), deny: unique(deny) }, sub: { allow: unique(sub), deny: [] } };
}

function unique(subjects: readonly string[]): string[] {
  return [...new Set(subjects)];
}
