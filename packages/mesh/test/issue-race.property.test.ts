/**
 * Issues racing (ADR 0221): `issueMembership` checks a record against every other one, then writes it;
 * two issues whose reads both came before either write used to both pass. Each round here starts
 * empty buckets and issues a few random records at once — prefixes and seat subjects drawn from a
 * small tree so that they nest, repeat, sit side by side or squat on a seat's default subject — on a
 * real nats-server, then compares with a serial oracle: run one by one in the order they were written
 * (each accepted record's revision), then the refused ones, the oracle accepts exactly those accepted
 * and refuses exactly those refused; every refusal names a party that holds a prefix nesting with it;
 * and the bucket holds exactly the accepted records.
 *
 * By default it runs rounds for about 20 s (at least 40); `TACKLE_PROPERTY_ROUNDS` sets the number of
 * rounds instead, from seed `TACKLE_PROPERTY_SEED` (default 221). The counts are printed.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, seededRandom, startNatsServer } from "@tackle/test-support";
import {
  CATALOGUE_BUCKET,
  connectMesh,
  type IssueMembershipOptions,
  issueMembership,
  MEMBERSHIP_BUCKET,
  MeshPrefixConflictError,
  MeshSeatTakenError,
  openMeshBuckets,
} from "../src/index.ts";

const roundsGiven = process.env.TACKLE_PROPERTY_ROUNDS;
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 221);
const budgetMs = 20_000;

let nats: NatsServerHandle;
let connections: NatsConnection[] = [];
before(async () => {
  nats = await startNatsServer();
  // Several connections, so the racing issues' requests interleave on the server as separate clients' would.
  connections = await Promise.all([1, 2, 3].map(() => connectMesh({ servers: nats.url })));
});
after(async () => {
  for (const connection of connections) await connection.drain();
  await nats?.close();
});

/** A party of the oracle: a module's tools (no seat) or one of its seats, at a prefix. */
interface Party {
  readonly module: string;
  readonly seat: string | undefined;
  readonly prefix: string;
}

/** The oracle's own nesting test, by tokens: equal, or one's tokens begin the other's. */
function nests(left: string, right: string): boolean {
  const [short, long] = left.length <= right.length ? [left, right] : [right, left];
  const shortTokens = short.split(".");
  const longTokens = long.split(".");
  return shortTokens.every((token, index) => longTokens[index] === token);
}

/** Prefixes strictly over every default one (`tackle.tools.<module>`, `tackle.seats.<seat>`). */
function overEveryDefault(prefix: string): boolean {
  return ["tackle.tools", "tackle.seats"].some(
    (root) => nests(prefix, `${root}.x`) && prefix !== `${root}.x`,
  );
}

function partiesOf(issue: IssueMembershipOptions): Party[] {
  const seats = Object.entries((issue.seats ?? {}) as Record<string, string | undefined>);
  return [
    { module: issue.module, seat: undefined, prefix: issue.prefix ?? `tackle.tools.${issue.module}` },
    ...seats.map(([seat, subject]) => ({
      module: issue.module,
      seat,
      prefix: subject ?? `tackle.seats.${seat}`,
    })),
  ];
}

function sameParty(left: Party, right: Party): boolean {
  return left.module === right.module && left.seat === right.seat;
}

/** The seats of `issue` another module of `accepted` holds (ADR 0224: a seat answers for one module). */
function seatsTaken(issue: IssueMembershipOptions, accepted: readonly IssueMembershipOptions[]): string[] {
  return Object.keys(issue.seats ?? {}).filter((seat) =>
    accepted.some((other) => other.module !== issue.module && Object.hasOwn(other.seats ?? {}, seat)),
  );
}

/**
 * Whether the oracle accepts `issue` beside `accepted`: none of its parties nests with another party's,
 * and none of its seats is another module's.
 */
function oracleAccepts(issue: IssueMembershipOptions, accepted: readonly IssueMembershipOptions[]): boolean {
  const own = partiesOf(issue);
  const held = accepted.flatMap(partiesOf);
  if (seatsTaken(issue, accepted).length > 0) return false;
  return own.every(
    (party, index) =>
      !overEveryDefault(party.prefix) &&
      [...held, ...own.slice(0, index)].every(
        (other) => sameParty(party, other) || !nests(party.prefix, other.prefix),
      ),
  );
}

const tree = [
  "p",
  "p.a",
  "p.b",
  "p.a.b",
  "p.a.a",
  "p.b.a",
  "q",
  "tackle.seats.s1",
  "tackle.seats.s1.a",
  "tackle.seats.s2",
];

/** A prefix from the tree, now and then one over every default, or none (the module's default). */
function randomPrefix(random: () => number): string | undefined {
  const roll = random();
  if (roll < 0.03) return random() < 0.5 ? "tackle.seats" : "tackle";
  if (roll < 0.12) return undefined;
  return tree[Math.floor(random() * tree.length)];
}

function randomIssues(random: () => number): IssueMembershipOptions[] {
  const keys = new Set<string>();
  const issues: IssueMembershipOptions[] = [];
  const count = 2 + Math.floor(random() * 6);
  while (issues.length < count) {
    const node = `n${1 + Math.floor(random() * 3)}`;
    const module = `m${1 + Math.floor(random() * 4)}`;
    if (keys.has(`${node}.${module}`)) continue;
    keys.add(`${node}.${module}`);
    const prefix = randomPrefix(random);
    const seats: Record<string, string | undefined> = {};
    if (random() < 0.35)
      seats[`s${1 + Math.floor(random() * 2)}`] = random() < 0.5 ? undefined : randomPrefix(random);
    issues.push({ node, module, ...(prefix === undefined ? {} : { prefix }), seats });
  }
  return issues;
}

/** Empties both buckets (purged, not deleted: a round is about the check and the write, not creating the buckets). */
async function emptyBuckets(connection: NatsConnection): Promise<void> {
  await openMeshBuckets(connection);
  const manager = await jetstreamManager(connection);
  for (const bucket of [MEMBERSHIP_BUCKET, CATALOGUE_BUCKET]) await manager.streams.purge(`KV_${bucket}`);
}

interface RoundCounts {
  issues: number;
  accepted: number;
  refused: number;
  contested: number;
}

/** One round: the issues at once, then the oracle's verdict on what happened. */
async function round(index: number, random: () => number, counts: RoundCounts): Promise<void> {
  const issues = randomIssues(random);
  const describe = `round ${index} (seed ${seed}): ${JSON.stringify(issues)}`;
  await emptyBuckets(connections[0] as NatsConnection);
  const settled = await Promise.allSettled(
    issues.map((issue, at) => issueMembership(connections[at % connections.length] as NatsConnection, issue)),
  );
  const accepted: IssueMembershipOptions[] = [];
  const refused: [IssueMembershipOptions, MeshPrefixConflictError | MeshSeatTakenError][] = [];
  for (const [at, outcome] of settled.entries()) {
    const issue = issues[at] as IssueMembershipOptions;
    if (outcome.status === "fulfilled") {
      accepted.push(issue);
      continue;
    }
    assert.ok(
      MeshPrefixConflictError.isInstance(outcome.reason) || MeshSeatTakenError.isInstance(outcome.reason),
      `${describe}: ${String(outcome.reason)}`,
    );
    refused.push([issue, outcome.reason]);
  }

  // The bucket holds exactly the accepted records; their revisions are the order they were written in.
  const bucket = await new Kvm(connections[0] as NatsConnection).open(MEMBERSHIP_BUCKET);
  const revisions = new Map<IssueMembershipOptions, number>();
  for (const issue of issues) {
    const entry = await bucket.get(`${issue.node}.${issue.module}`);
    const written = entry !== null && entry.operation === "PUT";
    assert.equal(
      written,
      accepted.includes(issue),
      `${describe}: ${issue.node}.${issue.module} written=${written}`,
    );
    if (entry !== null) revisions.set(issue, entry.revision);
  }
  const serial = [...accepted].sort(
    (left, right) => (revisions.get(left) ?? 0) - (revisions.get(right) ?? 0),
  );
  const oracleHeld: IssueMembershipOptions[] = [];
  for (const issue of serial) {
    assert.ok(
      oracleAccepts(issue, oracleHeld),
      `${describe}: accepted ${JSON.stringify(issue)} beside ${JSON.stringify(oracleHeld)}`,
    );
    oracleHeld.push(issue);
  }
  for (const [issue, error] of refused) {
    assert.equal(
      oracleAccepts(issue, oracleHeld),
      false,
      `${describe}: refused ${JSON.stringify(issue)}: ${error.message}`,
    );
    if (MeshSeatTakenError.isInstance(error)) {
      // The seat is the issue's, and a module accepted in the round really holds it.
      assert.ok(
        error.module === issue.module &&
          Object.hasOwn(issue.seats ?? {}, error.seat) &&
          accepted.some(
            (other) =>
              other.module === error.heldBy &&
              other.module !== issue.module &&
              Object.hasOwn(other.seats ?? {}, error.seat),
          ),
        `${describe}: refusal names no real holder of the seat: ${error.message}`,
      );
      continue;
    }
    // The refusal names one of the issue's parties and a party that really holds a prefix nesting with it.
    const mine = partiesOf(issue).find(
      (party) => party.module === error.module && party.seat === error.seat && party.prefix === error.prefix,
    );
    assert.ok(mine, `${describe}: refusal names no party of its issue: ${error.message}`);
    const holders = [...accepted, issue].flatMap(partiesOf);
    const holder =
      error.heldBy === "*"
        ? overEveryDefault(error.prefix)
        : holders.some(
            (party) =>
              party.module === error.heldBy &&
              party.seat === error.heldSeat &&
              party.prefix === error.heldPrefix &&
              !sameParty(party, mine) &&
              nests(party.prefix, mine.prefix),
          );
    assert.ok(holder, `${describe}: refusal names no real holder: ${error.message}`);
  }
  counts.issues += issues.length;
  counts.accepted += accepted.length;
  counts.refused += refused.length;
  // A round where two of the issues, alone, would each have been accepted but not both.
  if (
    issues.some((left, at) =>
      issues
        .slice(at + 1)
        .some(
          (right) => oracleAccepts(left, []) && oracleAccepts(right, []) && !oracleAccepts(right, [left]),
        ),
    )
  )
    counts.contested += 1;
}

it("issues racing each other come out as a serial oracle says: no two accepted prefixes nest, each refusal names a real holder", async () => {
  const random = seededRandom(seed);
  const counts: RoundCounts = { issues: 0, accepted: 0, refused: 0, contested: 0 };
  const started = performance.now();
  let index = 0;
  const rounds = roundsGiven === undefined ? undefined : Number(roundsGiven);
  while (rounds === undefined ? index < 40 || performance.now() - started < budgetMs : index < rounds) {
    await round(index, random, counts);
    index += 1;
  }
  console.log(
    `issue race: ${index} rounds, ${counts.issues} issues (${counts.accepted} accepted, ${counts.refused} refused), ${counts.contested} rounds contested, in ${Math.round(performance.now() - started)} ms (seed ${seed})`,
  );
  assert.ok(counts.contested > index / 4, "most rounds race issues that conflict");
});
