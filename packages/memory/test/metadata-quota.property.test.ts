/**
 * The metadata counter (ADR 0556) against an oracle, on a SQLite file and on PostgreSQL: random adds,
 * duplicates, edits, deletes, events (with metadata, with `{}` or with none, their episodes carrying
 * the speaker and role the service writes), documents and purges with metadata of random size and
 * script, under a small `maxMetadataBytes`. After every operation the tenant's counter equals the
 * metadata bytes the callers sent, recomputed from its rows (ADR 0563); a refused write changed no
 * row and was refused only when it did not fit (`used` the counter before it, `requested` what it
 * asked: for an add or an event exactly the metadata it sent); an accepted write that grew the
 * counter left it within the limit (only a delete, never refused, may pass it). Seed
 * `TACKLE_PROPERTY_SEED` (default 23).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, MemoryError, type MemoryService, type MemoryStore } from "@tackle/memory";
import { seededRandom } from "@tackle/test-support";
import {
  type MetadataSubject,
  metadataFromRows,
  postgresMetadataSubject,
  sqliteMetadataSubject,
} from "./support/metadata-subjects.ts";

const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 23);
const limit = 4_000;
const tenant = "oracle";
const users = ["u0", "u1", "u2"];

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-metadata-oracle-"));
const subjects: MetadataSubject[] = [];
after(async () => {
  for (const subject of subjects) await subject.close();
  rmSync(directory, { recursive: true, force: true });
});

const bytes = (text: string) => Buffer.byteLength(text, "utf8");
/** One, two, three and four UTF-8 bytes, and characters JSON escapes. */
const alphabet = ["a", "z", "7", " ", "é", "ñ", "€", "語", "😀", '"', "\\", "\n"];

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

function randomText(random: Random, most: number): string {
  return Array.from({ length: Math.floor(random() * most) }, () => pick(random, alphabet)).join("");
}

/** Metadata of a few keys: text, whole numbers, flags, a list; `{}` now and then. */
function randomMetadata(random: Random): Record<string, unknown> {
  const metadata: Record<string, unknown> = {};
  const keys = Math.floor(random() * 4);
  for (let key = 0; key < keys; key += 1) {
    const name = `k${key}${randomText(random, 3)}`;
    const kind = random();
    metadata[name] =
      kind < 0.55
        ? randomText(random, 300)
        : kind < 0.7
          ? Math.floor(random() * 1e6)
          : kind < 0.85
            ? random() < 0.5
            : [randomText(random, 20), Math.floor(random() * 100)];
  }
  return metadata;
}

interface Outcome {
  readonly operation: string;
  /**
   * What the write asks, when the oracle knows it exactly: the JSON text of the metadata the caller
   * sent (an add's; an event's, none when it sent none, ADR 0563), charged if stored, `requested` if
   * refused.
   */
  asked?: number;
  /** An event sent without metadata (or `{}`): never refused for metadata (ADR 0563). */
  bare?: boolean;
  readonly grows: boolean;
}

const sent = (metadata: Record<string, unknown> | undefined) =>
  metadata === undefined || Object.keys(metadata).length === 0 ? 0 : bytes(JSON.stringify(metadata));

/** One random operation, told in `outcome` before its write; throws what the service throws. */
async function operate(
  service: MemoryService,
  random: Random,
  step: number,
  outcome: (told: Outcome) => void,
): Promise<Outcome> {
  const userId = pick(random, users);
  const roll = random();
  const tell = (told: Outcome) => {
    outcome(told);
    return told;
  };
  if (roll < 0.3) {
    const metadata = randomMetadata(random);
    const told = tell({ operation: "add", asked: sent(metadata), grows: true });
    await service.add(tenant, { userId, content: `fact ${step} ${randomText(random, 20)}`, metadata });
    return told;
  }
  const { memories } = await service.listMemories(tenant, { userId, limit: 50 });
  const memory = memories.length > 0 ? pick(random, memories) : undefined;
  if (roll < 0.4 && memory?.content.startsWith("fact ")) {
    // The same text in the same scope: answered as the duplicate, nothing stored, nothing charged.
    const answer = await service.add(tenant, {
      userId,
      content: memory.content,
      metadata: randomMetadata(random),
    });
    assert.equal(answer.created, false, `step ${step}: a duplicate was stored`);
    return { operation: "duplicate", grows: false };
  }
  if (roll < 0.55 && memory) {
    const metadata = randomMetadata(random);
    const edit = random() < 0.5 ? { metadata } : { metadata, content: `${memory.content} (edited ${step})` };
    await service.updateMemory(tenant, memory.id, edit);
    return { operation: "update", grows: true };
  }
  if (roll < 0.62 && memory) {
    await service.deleteMemory(tenant, memory.id, { reason: `step ${step}` });
    return { operation: "delete", grows: false };
  }
  if (roll < 0.8) {
    // Without metadata a third of the time: its episode carries the speaker and role the service
    // writes, which the caller did not send and is not charged (ADR 0563).
    const metadata = random() < 0.35 ? undefined : randomMetadata(random);
    const asked = sent(metadata);
    const told = tell({ operation: "event", asked, bare: asked === 0, grows: true });
    await service.writeEvent(tenant, {
      userId,
      sessionId: `s-${userId}`,
      role: pick(random, ["user", "assistant"] as const),
      content: `turn ${step} ${randomText(random, 40)}`,
      ...(metadata ? { metadata } : {}),
      ...(random() < 0.3 ? { infer: true } : { infer: false }),
    });
    return told;
  }
  if (roll < 0.92) {
    const metadata = randomMetadata(random);
    await service.ingestDocument(tenant, {
      userId,
      title: `doc ${step}`,
      content: `document ${step} ${randomText(random, 60)}`,
      metadata,
    });
    return { operation: "document", grows: true };
  }
  await service.purge(tenant, { userId });
  return { operation: "purge", grows: false };
}

async function property(subject: MetadataSubject, steps: number) {
  const random = seededRandom(seed);
  const store: MemoryStore = await subject.open();
  const service = createMemoryService({ store, quotas: { maxMetadataBytes: limit }, resumeJobs: false });
  const tally: Record<string, number> = { refused: 0, overLimit: 0, bareNearLimit: 0 };
  try {
    for (let step = 0; step < steps; step += 1) {
      const rowsBefore = await metadataFromRows(subject, tenant);
      const counterBefore = (await store.usage(tenant)).metadataBytes;
      assert.equal(counterBefore, rowsBefore, `step ${step}: the counter before`);
      let outcome: Outcome | undefined;
      let told: Outcome | undefined;
      let refused: Record<string, unknown> | undefined;
      try {
        outcome = await operate(service, random, step, (operation) => {
          told = operation;
        });
      } catch (error) {
        if (!(MemoryError.isInstance(error) && error.code === "quota_exceeded")) throw error;
        refused = error.data as Record<string, unknown>;
      }
      const rowsAfter = await metadataFromRows(subject, tenant);
      const counterAfter = (await store.usage(tenant)).metadataBytes;
      assert.equal(counterAfter, rowsAfter, `step ${step} (${outcome?.operation ?? "refused"}): the counter`);
      if (refused) {
        tally.refused! += 1;
        assert.equal(refused.kind, "metadataBytes", `step ${step}: ${JSON.stringify(refused)}`);
        assert.equal(rowsAfter, rowsBefore, `step ${step}: a refused write changed the rows`);
        assert.equal(refused.used, counterBefore, `step ${step}: used`);
        assert.ok(
          counterBefore + Number(refused.requested) > limit,
          `step ${step}: refused while ${JSON.stringify(refused)} fit`,
        );
        const asked = (told as Outcome | undefined)?.asked;
        if (asked !== undefined) {
          assert.equal(
            refused.requested,
            asked,
            `step ${step}: ${told!.operation} refused for more than it sent`,
          );
        }
        continue;
      }
      tally[outcome!.operation] = (tally[outcome!.operation] ?? 0) + 1;
      if (outcome!.asked !== undefined) {
        assert.equal(
          rowsAfter - rowsBefore,
          outcome!.asked,
          `step ${step}: what ${outcome!.operation} charged`,
        );
      }
      // A bare event near the limit (its episode's speaker and role would not have fit) is stored.
      if (outcome!.bare && counterBefore + bytes('{"speaker":"assistant","role":"assistant"}') > limit) {
        tally.bareNearLimit! += 1;
      }
      if (outcome!.grows && rowsAfter > rowsBefore) {
        assert.ok(rowsAfter <= limit, `step ${step}: ${outcome!.operation} passed the limit: ${rowsAfter}`);
      }
      if (rowsAfter > limit) tally.overLimit! += 1;
    }
  } catch (error) {
    throw new Error(`${subject.name}, seed ${seed}: ${(error as Error).message}`, { cause: error });
  } finally {
    await service.close();
  }
  console.log(`${subject.name}: ${JSON.stringify({ steps, ...tally })}`);
  // The walk reached every kind of operation and the limit, both ways.
  for (const operation of ["add", "duplicate", "update", "delete", "event", "document", "purge"]) {
    assert.ok((tally[operation] ?? 0) > 0, `no ${operation} was accepted in ${steps} steps`);
  }
  assert.ok(tally.refused! > 0, "no write was refused");
  assert.ok(tally.bareNearLimit! > 0, "no event without metadata was sent near the limit");
}

let files = 0;
describe("the metadata counter against its rows", () => {
  it("a SQLite file: 300 random operations", async () => {
    const subject = sqliteMetadataSubject(join(directory, `oracle-${++files}.db`));
    subjects.push(subject);
    await property(subject, 300);
  });
  it("PostgreSQL: 300 random operations", async () => {
    const subject = await postgresMetadataSubject("tackle_memory_metadata_oracle");
    subjects.push(subject);
    await property(subject, 300);
  });
});
