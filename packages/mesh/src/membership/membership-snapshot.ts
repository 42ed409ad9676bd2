/**
 * The membership bucket read as one state and written only if that state still holds (ADR 0221).
 * `issueMembership` checks a new record against every other record and then writes it; two issues
 * whose reads both come before either write would both pass. So an issue reads the bucket at a stream
 * sequence and writes its record with `Nats-Expected-Last-Sequence` set to it: the server takes the
 * write only if nothing else was written to the bucket since, and an issue that lost reads again —
 * only what was written since — and checks again against the winner.
 */
import {
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  type StoredMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { ToolAbortedError } from "@tackle/core";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import {
  CATALOGUE_BUCKET,
  type CatalogueRecord,
  checkMembership,
  MEMBERSHIP_BUCKET,
  type MembershipRecord,
} from "./records.ts";

/** Every live record of a bucket as of its stream's sequence `sequence`, by key. */
export interface BucketSnapshot<T> {
  readonly records: ReadonlyMap<string, T>;
  readonly sequence: number;
}

/** How a bucket's value becomes a record; undefined when it holds nothing (not JSON, wrong shape). */
type Parse<T> = (value: unknown, key: string) => T | undefined;

/** Past this many writes since the last snapshot, reading every key again is cheaper than each write. */
const CATCH_UP_LIMIT = 256;
/** Reads in flight at once: a few round trips for a large bucket, without flooding the server. */
const READS_AT_ONCE = 32;

/**
 * Reads a bucket as of one stream sequence, from the stream leader (`STREAM.INFO`, `STREAM.MSG.GET`;
 * not a direct get a lagging replica could answer). Given an earlier snapshot, reads only what was
 * written since: the messages after its sequence (a message a later write of the same key replaced
 * is gone, and that later one is read). A value written after the returned `sequence` may be read
 * too; a write that relies on the snapshot then fails. A bucket nobody created reads as empty.
 */
async function readBucketSnapshot<T>(
  connection: NatsConnection,
  bucket: string,
  parse: Parse<T>,
  since: BucketSnapshot<T> | undefined,
): Promise<BucketSnapshot<T>> {
  const stream = `KV_${bucket}`;
  const subjectPrefix = `$KV.${bucket}.`;
  const manager = await jetstreamManager(connection);
  const catchUp = since !== undefined;
  const info = await manager.streams.info(stream, catchUp ? {} : { subjects_filter: `${subjectPrefix}>` });
  const last = info.state.last_seq;
  const records = new Map(since?.records ?? []);
  const apply = (message: StoredMsg | null) => {
    if (message === null) return;
    const key = message.subject.slice(subjectPrefix.length);
    records.delete(key);
    // A delete or purge marker; a put has no operation header.
    const operation = message.header?.get("KV-Operation");
    if (operation !== "" && operation !== undefined) return;
    let value: unknown;
    try {
      value = message.json();
    } catch {
      return;
    }
    const record = parse(value, key);
    if (record !== undefined) records.set(key, record);
  };
  if (since !== undefined && last - since.sequence <= CATCH_UP_LIMIT) {
    const sequences = Array.from({ length: last - since.sequence }, (_, at) => since.sequence + 1 + at);
    for (const message of await inBatches(sequences, (seq) => manager.streams.getMessage(stream, { seq })))
      apply(message);
    return { records, sequence: last };
  }
  if (since !== undefined) return readBucketSnapshot(connection, bucket, parse, undefined);
  const subjects = Object.keys(info.state.subjects ?? {}).sort();
  const latest = (subject: string) => manager.streams.getMessage(stream, { last_by_subj: subject });
  for (const message of await inBatches(subjects, latest)) apply(message);
  return { records, sequence: last };
}

async function inBatches<T, R>(items: readonly T[], read: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += READS_AT_ONCE) {
    results.push(...(await Promise.all(items.slice(start, start + READS_AT_ONCE).map(read))));
  }
  return results;
}

/** The memberships (a record that does not parse holds nothing: its runtime refuses it). */
export function readMembershipSnapshot(
  connection: NatsConnection,
  since?: BucketSnapshot<MembershipRecord>,
): Promise<BucketSnapshot<MembershipRecord>> {
  const parse: Parse<MembershipRecord> = (value, key) => {
    try {
      return checkMembership(value, `${MEMBERSHIP_BUCKET}/${key}`);
    } catch {
      return undefined;
    }
  };
  return readBucketSnapshot(connection, MEMBERSHIP_BUCKET, parse, since);
}

/** The catalogue's records (module and prefix are all the check needs). */
export function readCatalogueSnapshot(
  connection: NatsConnection,
  since?: BucketSnapshot<CatalogueRecord>,
): Promise<BucketSnapshot<CatalogueRecord>> {
  const parse: Parse<CatalogueRecord> = (value) => {
    const record = value as Partial<CatalogueRecord> | null;
    return typeof record?.module === "string" && typeof record.prefix === "string"
      ? (record as CatalogueRecord)
      : undefined;
  };
  return readBucketSnapshot(connection, CATALOGUE_BUCKET, parse, since);
}

/** Writes `value` under `key` only if the bucket's last sequence is still `sequence`; false when it moved on. */
export async function writeIfUnchanged(
  connection: NatsConnection,
  key: string,
  value: string,
  sequence: number,
): Promise<boolean> {
  try {
    await jetstream(connection).publish(`$KV.${MEMBERSHIP_BUCKET}.${key}`, value, {
      expect: { lastSequence: sequence },
    });
    return true;
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence)
      return false;
    throw error;
  }
}

/** How often an issue reads and checks again before it gives up: each round, one of the racing issues wins. */
export const ISSUE_ATTEMPTS = 64;

/**
 * Runs `attempt` (read a snapshot, check, write if unchanged) until it writes. Between rounds a short
 * random wait, so issues that lost together do not collide again in step.
 */
export async function untilWritten<T>(
  what: string,
  signal: AbortSignal | undefined,
  attempt: () => Promise<T | undefined>,
): Promise<T> {
  for (let round = 0; round < ISSUE_ATTEMPTS; round += 1) {
    if (signal?.aborted) throw new ToolAbortedError(what, signal.reason);
    const written = await attempt();
    if (written !== undefined) return written;
    await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 * (round + 1))));
  }
  throw new MeshConfigError(
    "membership",
    `the membership bucket changed under each of ${ISSUE_ATTEMPTS} attempts to issue; nothing was written, issue again`,
  );
}
