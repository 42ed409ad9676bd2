/**
 * Purge against an oracle (ADR 0559), on a SQLite file and on PostgreSQL: random programs over three
 * users, two agents and two sessions, each step one write (add with or without metadata, under an
 * idempotency key or not, update, delete, event, document, core-block edit, search, a novelty scan,
 * an import or a consolidation job run by the service's worker and waited for) or a purge of a user
 * or a scope; now and then a purge runs together with writes to what it purges (`Promise.all`).
 * Each write carries a marker word of its own (`zq<round>k<n>q`). After each purge and after the
 * program:
 *
 * - no marker of a record the purge covered, written before it, is left in any column of any table
 *   (PostgreSQL: every text, JSON, binary and full-text column; SQLite: every column of every table,
 *   the full-text indexes' own tables among them), nor, at the end, in the SQLite file's bytes after
 *   a checkpoint and a vacuum; nor is the marker of a write that failed;
 * - no version, chunk or access record outlives its memory or document;
 * - the tenant's usage counters equal a count from its rows;
 * - at the end, every marker of a record no purge covered reads back through the service (a
 *   memory's versions, an event, a document's chunks by search, a core block, a trace, an
 *   idempotency key's kept answer).
 *
 * - every job ends: purged (its record gone) or succeeded, never left queued or running, never failed
 *   for a memory purged under it (ADR 0564); after a purge, every job it covered is gone and every
 *   other reads back as it finished; no job logs an error and no promise is left rejected unhandled.
 *
 * A write racing a purge of its own scope may land before it (and be purged) or after it (and stay):
 * the oracle reads which, and asks that it be whole either way: read back in full (a memory with its
 * version, a keyed write's memory with its kept answer), or in no column at all. A change to a record
 * that existed before the purge (an update, a delete, an append to a block) never brings it back.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the programs per store (default 12 on a SQLite file, 8 on
 * PostgreSQL), from seed `TACKLE_PROPERTY_SEED` (default 37).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { setImmediate } from "node:timers/promises";
import { silentLogger } from "@tackle/core";
import { createMemoryService, type MemoryStore } from "@tackle/memory";
import { seededRandom } from "@tackle/test-support";
import {
  covers,
  Program,
  type Random,
  randomPurge,
  randomScope,
  randomWrite,
  scopeWithin,
  type Write,
} from "./support/purge-program.ts";
import {
  orphansOf,
  type PurgeSubject,
  postgresPurgeSubject,
  purgeSubjectsOfSuite,
  sqlitePurgeSubject,
  usageFromRows,
} from "./support/purge-scans.ts";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 37);
const stepsPerProgram = 40;

/** The claims of the module comment, on the store as the program left it. */
async function check(subject: PurgeSubject, program: Program, when: string) {
  const found = await subject.scan(program.prefix);
  const left = program.marks.filter((mark) => mark.state === "gone" && found.has(mark.marker));
  assert.deepEqual(
    left.map((mark) => `${mark.what} ${mark.marker} of ${JSON.stringify(mark.scope)}`),
    [],
    `${when}: purged or refused text is still stored`,
  );
  assert.deepEqual(await orphansOf(subject, program.tenant), [], `${when}: rows outlive their record`);
  assert.deepEqual(
    await program.store.usage(program.tenant),
    await usageFromRows(subject, program.tenant),
    `${when}: the usage counters against a count of the rows`,
  );
}

/**
 * The store, each memory change made a turn of the event loop later: a job's changes (a consolidation
 * updates memory after memory) then spread over turns, and a purge beside it falls between them.
 */
function yieldingChanges(store: MemoryStore): MemoryStore {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      if (key !== "updateMemory") return value.bind(target);
      return async (...args: Parameters<MemoryStore["updateMemory"]>) => {
        await setImmediate();
        return target.updateMemory(...args);
      };
    },
  });
}

async function runProgram(
  subject: PurgeSubject,
  round: number,
  random: Random,
  tally: Record<string, number>,
) {
  const store = await subject.open(round);
  const limited = round % 2 === 1;
  const errors: string[] = [];
  const service = createMemoryService({
    store: yieldingChanges(store),
    resumeJobs: false,
    logger: {
      ...silentLogger,
      error: (message, fields) => errors.push(`${message} ${JSON.stringify(fields)}`),
    },
    // Every other program with (roomy) limits on: the writes then take the tenant's counter row first.
    ...(limited ? { quotas: { maxMemories: 1e6, maxCoreBlocks: 1e4, maxMetadataBytes: 1e8 } } : {}),
  });
  const program = new Program(service, store, `t${round}`, `zq${round}k`, random);
  try {
    for (let step = 0; step < stepsPerProgram; step += 1) {
      const roll = random();
      if (roll < 0.1) {
        await program.purge(randomPurge(random), []);
        await check(subject, program, `step ${step}, purge`);
      } else if (roll < 0.25) {
        const purged = randomPurge(random);
        // Writes beside the purge change different memories: two changes of one memory may conflict.
        const taken = new Set<string>();
        const writes = Array.from({ length: 1 + Math.floor(random() * 3) }, (): Write => {
          const scope = random() < 0.8 ? scopeWithin(random, purged) : randomScope(random);
          return randomWrite(program, scope, covers(purged, scope) ? purged : scope, taken);
        });
        await program.purge(purged, writes);
        await check(subject, program, `step ${step}, purge with writes`);
      } else {
        const scope = randomScope(random);
        await randomWrite(program, scope, { userId: scope.userId! }).run(false);
      }
    }
    await check(subject, program, "the program's end");
    const unread: string[] = [];
    for (const mark of program.marks) {
      if (mark.state === "kept" && !(await mark.read())) unread.push(`${mark.what} ${mark.marker}`);
    }
    assert.deepEqual(unread, [], "what no purge covered reads back");
    assert.deepEqual(errors, [], "errors the service logged");
  } finally {
    await service.close();
  }
  if (subject.fileBytes) {
    const bytes = subject.fileBytes(program.prefix);
    const left = program.marks.filter((mark) => mark.state === "gone" && bytes.has(mark.marker));
    assert.deepEqual(
      left.map((mark) => `${mark.what} ${mark.marker}`),
      [],
      "purged text is in the file's bytes",
    );
    assert.ok(
      program.marks.some((mark) => mark.state === "kept" && bytes.has(mark.marker)),
      "the byte scan sees kept text",
    );
  }
  for (const [what, count] of Object.entries(program.tally)) tally[what] = (tally[what] ?? 0) + count;
}

async function property(subject: PurgeSubject, programs: number) {
  const random = seededRandom(seed);
  const tally: Record<string, number> = {};
  for (let round = 0; round < programs; round += 1) {
    try {
      await runProgram(subject, round, random, tally);
    } catch (error) {
      throw new Error(`${subject.name}, seed ${seed}, program ${round}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  console.log(`${subject.name}: ${JSON.stringify({ programs, ...tally })}`);
  const kinds = [
    "add",
    "keyed add",
    "update",
    "delete",
    "event",
    "document",
    "core block",
    "search",
    "import",
    "consolidation",
    "novelty scan",
  ];
  for (const what of kinds) {
    assert.ok((tally[what] ?? 0) > 0, `no ${what} in ${programs} programs`);
  }
  assert.ok((tally["purge with writes"] ?? 0) > 0 && (tally["raced, gone"] ?? 0) > 0, "no race was run");
  assert.ok((tally["consolidation raced"] ?? 0) > 0, "no consolidation ran beside a purge of its scope");
}

const { directory, subjects } = purgeSubjectsOfSuite("tackle-memory-purge-oracle-");
const unhandled: unknown[] = [];
process.on("unhandledRejection", (reason) => unhandled.push(reason));
after(() => assert.deepEqual(unhandled, [], "promises rejected with no handler"));

describe("purge against an oracle", () => {
  it("a SQLite file: random programs of writes and purges, some racing", async () => {
    const subject = sqlitePurgeSubject(directory);
    subjects.push(subject);
    await property(subject, rounds(12));
  });
  it("PostgreSQL: random programs of writes and purges, some racing", async () => {
    const subject = await postgresPurgeSubject("tackle_memory_purge_oracle");
    subjects.push(subject);
    await property(subject, rounds(8));
  });
});
