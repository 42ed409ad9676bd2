/**
 * The tool's replica takes a committed plan after the commit is answered (ADR 0516): a property test
 * against an oracle of each clip's volume. Random steps on one document: the tool writes a clip's
 * volume and commits it, its next call issued at once or after the answer; another user writes a
 * clip's volume; the tool writes on a base another user then changes (the commit is `conflicted`, and
 * its write must never show); the tool reads every clip's volume, which must equal the oracle's. On a
 * document read whole and on one read on demand from the server.
 *
 * `TACKLE_PROPERTY_ROUNDS=<steps>` sets the steps per document (200 by default).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LoroDoc, type LoroMap } from "loro-crdt";
import type { DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { random } from "../test/lost-update-plans.ts";
import { type Harness, startHarness } from "./harness.ts";

const steps = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 200);

let harness: Harness;
before(async () => {
  harness = await startHarness();
});
after(() => harness.close());

function ok(result: DocScriptResult): Record<string, unknown> {
  assert.ok(result.ok, JSON.stringify(result).slice(0, 400));
  return result as unknown as Record<string, unknown>;
}

const readVolumes = `console.log(JSON.stringify(Object.fromEntries(entities.list({ entityKind: 'clip', limit: 5000 }).map((clip) => [clip.entityId, clip.payload.volume]))));`;
const writeVolume = (clipId: string, volume: number) =>
  `entities.update(${JSON.stringify(clipId)}, [{ op: 'set', path: ['volume'], value: ${volume} }]);`;

for (const [reads, readWholeUpTo, seed] of [
  ["read whole", Number.POSITIVE_INFINITY, 516],
  ["read on demand", 10, 517],
] as const) {
  describe(`the tool's replica after its commits, the document ${reads}`, { timeout: 900_000 }, () => {
    test(`${steps} random steps read every committed volume, and no conflicted one`, async () => {
      const docId = `replica-after-commit-${reads.replaceAll(" ", "-")}`;
      await harness.createDocument(docId, 12);
      const tool = harness.tool({ sandbox: { readWholeUpTo } });
      const next = random(seed);
      const pick = <T>(items: readonly T[]): T => items[next(items.length)] as T;
      const oracle = new Map<string, unknown>();
      for (const entity of (await harness.read(docId)).entities)
        if (entity.entityKind === "clip") oracle.set(entity.entityId, entity.payload.volume);
      const clipIds = [...oracle.keys()];
      const run = async (script: string) =>
        ok(await tool.handle({ op: "run-edit-script", doc_id: docId, script }));
      const commit = (planId: string) => tool.handle({ op: "commit-plan", doc_id: docId, plan_id: planId });
      /** Another user's write of a clip's volume, straight to the server. */
      const theirWrite = async (clipId: string, volume: number) => {
        const theirs = new LoroDoc();
        await harness.client.pullInto(docId, theirs);
        const since = theirs.oplogVersion();
        const row = theirs.getMap("entities").get(clipId) as LoroMap;
        (row.get("fields") as LoroMap).set("volume", volume);
        theirs.commit();
        const pushed = await harness.client.push(docId, theirs.export({ mode: "update", from: since }));
        assert.equal(pushed.status, "committed", JSON.stringify(pushed));
        oracle.set(clipId, volume);
      };
      // A commit whose answer the next tool call does not wait for: checked once it comes.
      let pending: Promise<void> | undefined;
      const settle = async () => {
        await pending;
        pending = undefined;
      };
      const counts = { written: 0, unawaited: 0, theirs: 0, conflicted: 0, reads: 0 };
      for (let step = 0; step < steps; step++) {
        const roll = next(100);
        const clipId = pick(clipIds);
        const volume = -next(40) || 0;
        if (roll < 40) {
          const planned = await run(writeVolume(clipId, volume));
          // The oracle takes it now: any call issued after this commit runs after it.
          oracle.set(clipId, volume);
          counts.written++;
          const committing = commit(planned.plan_id as string).then((answer) => {
            assert.equal(ok(answer).status, "committed", `step ${step}: ${JSON.stringify(answer)}`);
          });
          if (next(2) === 0) {
            pending = Promise.all([pending, committing]).then(() => {});
            counts.unawaited++;
          } else await committing;
        } else if (roll < 55) {
          await settle();
          await theirWrite(clipId, volume);
          counts.theirs++;
        } else if (roll < 65) {
          // Planned on a base another user then changes: conflicted, and never read afterwards.
          await settle();
          // The plan changes the volume (a write of the value it holds is no change, and commits as
          // one), and theirs differs from both, so the plan would overwrite it.
          const current = oracle.get(clipId);
          const mine = volume === current ? volume - 1 : volume;
          const theirs = mine - 1 === current ? mine - 2 : mine - 1;
          const planned = await run(writeVolume(clipId, mine));
          await theirWrite(clipId, theirs);
          const answer = ok(await commit(planned.plan_id as string));
          assert.equal(answer.status, "conflicted", `step ${step}: ${JSON.stringify(answer)}`);
          counts.conflicted++;
        } else {
          // Issued while an earlier commit may still be unanswered: it runs after that commit.
          const logs = (await run(readVolumes)).logs as { text: string }[];
          const read = JSON.parse(logs[0]?.text ?? "{}") as Record<string, unknown>;
          assert.deepEqual(
            read,
            Object.fromEntries(oracle),
            `step ${step}: the read differs from the oracle`,
          );
          counts.reads++;
        }
      }
      await settle();
      const final = await harness.read(docId);
      for (const entity of final.entities)
        if (entity.entityKind === "clip")
          assert.equal(entity.payload.volume, oracle.get(entity.entityId), entity.entityId);
      // Every kind of step was played.
      assert.ok(
        Object.values(counts).every((count) => count > 0),
        JSON.stringify(counts),
      );
      process.stderr.write(`${reads}: ${JSON.stringify(counts)}\n`);
    });
  });
}
