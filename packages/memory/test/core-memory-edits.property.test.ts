/**
 * Concurrent self-edits of core memory as a property against an oracle, on each store: random plans
 * of appends, replaces and reads on a scope's blocks, in two waves each started at once (the first
 * racing to create the blocks), must leave each block holding exactly the lines of the edits that answered
 * success, each once, and nothing of an edit that was refused; the block's version counts the edits
 * that changed it (and the first edit of the scope, which writes both preset blocks).
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the rounds (default 150 on a SQLite file, 60 on PostgreSQL), from
 * seed `TACKLE_PROPERTY_SEED` (default 13).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, createSqliteStore, MemoryError, type MemoryService } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 13);
const labels = ["human", "persona"] as const;

type Edit =
  | { op: "append"; label: (typeof labels)[number]; line: string }
  | { op: "replace"; label: (typeof labels)[number]; line: string; replacement: string }
  | { op: "read" };

interface Counters {
  edits: number;
  replaced: number;
  refused: number;
}

/**
 * Two waves, each started at once: appends and reads, then appends, reads and replaces of lines the
 * first wave added (two replaces of one line race: one of them finds it gone).
 */
function plan(random: () => number, round: number): Edit[][] {
  const appended: { label: (typeof labels)[number]; line: string }[] = [];
  let index = 0;
  const wave = (replaces: boolean) =>
    Array.from({ length: 3 + Math.floor(random() * 10) }, (): Edit => {
      index += 1;
      const label = labels[Math.floor(random() * labels.length)]!;
      const roll = random();
      if (roll < 0.15) return { op: "read" };
      if (replaces && roll < 0.55 && appended.length > 0) {
        const target = appended[Math.floor(random() * appended.length)]!;
        return { op: "replace", ...target, replacement: `[r${round}.${index}]` };
      }
      const line = `[a${round}.${index}]`;
      if (!replaces) appended.push({ label, line });
      return { op: "append", label, line };
    });
  return [wave(false), wave(true)];
}

async function runRound(service: MemoryService, random: () => number, round: number, counters: Counters) {
  const tenantId = `tenant-${round}-${random().toString(36).slice(2)}`;
  const userId = "u1";
  const waves = plan(random, round);
  /** Per label: the lines the edits that answered success put there, and the lines they took out. */
  const added = new Map<string, Set<string>>(labels.map((label) => [label, new Set()]));
  const removed = new Map<string, Set<string>>(labels.map((label) => [label, new Set()]));
  const changes = new Map<string, number>(labels.map((label) => [label, 0]));
  for (const edits of waves) await runWave(edits);
  async function runWave(edits: Edit[]) {
    await Promise.all(
      edits.map(async (edit) => {
        counters.edits += 1;
        if (edit.op === "read") {
          await service.selfEdit(tenantId, { userId });
          return;
        }
        const request =
          edit.op === "append"
            ? { op: "append" as const, label: edit.label, text: edit.line }
            : { op: "replace" as const, label: edit.label, oldText: edit.line, newText: edit.replacement };
        try {
          await service.selfEdit(tenantId, { userId, edits: [request] });
        } catch (error) {
          // Only a replace may be refused: its line is not there (yet, or any more).
          assert.ok(edit.op === "replace" && MemoryError.isInstance(error), String(error));
          counters.refused += 1;
          return;
        }
        changes.set(edit.label, changes.get(edit.label)! + 1);
        if (edit.op === "append") added.get(edit.label)!.add(edit.line);
        else {
          counters.replaced += 1;
          removed.get(edit.label)!.add(edit.line);
          added.get(edit.label)!.add(edit.replacement);
        }
      }),
    );
  }
  const { blocks } = await service.selfEdit(tenantId, { userId });
  for (const label of labels) {
    const block = blocks.find((candidate) => candidate.label === label);
    const value = block?.value ?? "";
    const held = value.match(/\[[ar]\d+\.\d+\]/g) ?? [];
    const expected = [...added.get(label)!].filter((line) => !removed.get(label)!.has(line));
    assert.deepEqual([...held].sort(), expected.sort(), `round ${round}, block ${label}: ${value}`);
    // One version per edit of its own, and one more when an edit of the other block wrote it first
    // (the first edit of a scope writes both preset blocks).
    const extra = (block?.version ?? 0) - changes.get(label)!;
    assert.ok(extra === 0 || extra === 1, `round ${round}, block ${label}: version ${block?.version}`);
  }
}

async function runProperty(service: MemoryService, count: number): Promise<Counters> {
  const random = seededRandom(seed);
  const counters: Counters = { edits: 0, replaced: 0, refused: 0 };
  for (let round = 1; round <= count; round += 1) {
    try {
      await runRound(service, random, round, counters);
    } catch (error) {
      throw new Error(`round ${round} of seed ${seed} failed`, { cause: error });
    }
  }
  assert.ok(counters.replaced > 0 && counters.refused > 0, JSON.stringify(counters));
  return counters;
}

describe("concurrent core-memory self-edits (property against an oracle)", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-core-edits-"));
  let database: TestDatabase | undefined;
  const services: MemoryService[] = [];
  after(async () => {
    for (const service of services) await service.close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("SQLite file: each block holds exactly the edits that answered success", async () => {
    const service = createMemoryService({ store: createSqliteStore({ path: join(directory, "core.db") }) });
    services.push(service);
    console.log(`SQLite: ${JSON.stringify(await runProperty(service, rounds(150)))}`);
  });

  it("PostgreSQL: each block holds exactly the edits that answered success", async () => {
    database = await createTestDatabase("tackle_memory_core_edits");
    const service = createMemoryService({
      store: await createPostgresStore({ connectionString: database.url }),
    });
    services.push(service);
    console.log(`PostgreSQL: ${JSON.stringify(await runProperty(service, Math.ceil(rounds(150) * 0.4)))}`);
  });
});
