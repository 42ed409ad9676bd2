/**
 * A run's staging (ADR 0508): parts of its writes past the threshold, each committed with the plan's
 * message; none after the first `stageForMs`, none after a refusal; at most `partsInFlight` unanswered;
 * the rest at the end only for a run that staged and did not fail.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeImportBlobMeta, LoroDoc } from "loro-crdt";
import { atomsPerPart, partsInFlight, runStaging, stageAfterAtoms, stageForMs } from "./run-staging.ts";

const planCommit = { message: JSON.stringify({ planId: "plan-1", actor: null }), origin: "docscript-plan" };

/** A run doc on its own peer, a clock the test moves, and the parts handed over. */
function harness(answer: (part: Uint8Array) => boolean = () => true) {
  const doc = new LoroDoc();
  doc.setPeerId(9);
  let clock = 0;
  const parts: Uint8Array[] = [];
  const staging = runStaging(
    doc,
    async (part) => {
      parts.push(part);
      return { staged: answer(part) };
    },
    planCommit,
    () => clock,
  );
  const write = (atoms: number) => {
    const map = doc.getMap("m");
    for (let index = 0; index < atoms; index++) map.set(`k${map.size}`, index);
  };
  return { doc, parts, staging, write, tick: (ms: number) => (clock += ms) };
}

/** The counter range each part carries on the run's peer. */
const ranges = (parts: readonly Uint8Array[]) =>
  parts.map((part) => {
    const meta = decodeImportBlobMeta(part, false);
    return [meta.partialStartVersionVector.get("9") ?? 0, meta.partialEndVersionVector.get("9") ?? 0];
  });

test("writes past the threshold go in parts that follow one another, committed with the plan's message", () => {
  const { doc, parts, staging, write } = harness();
  write(stageAfterAtoms - 1);
  staging.afterWrite();
  assert.equal(parts.length, 0);
  write(1);
  staging.afterWrite();
  assert.deepEqual(
    ranges(parts),
    Array.from({ length: stageAfterAtoms / atomsPerPart }, (_, index) => [
      index * atomsPerPart,
      (index + 1) * atomsPerPart,
    ]),
  );
  // The plan's id is on the staged change: the run's own last commit may find nothing pending.
  assert.equal(doc.getChangeAt({ peer: "9", counter: 0 }).message, planCommit.message);
  assert.equal(doc.getPendingTxnLength(), 0);
});

test("the rest is staged at the end of a run that staged, not of a failed one, and none past the time bound", async () => {
  const ended = harness();
  ended.write(stageAfterAtoms);
  ended.staging.afterWrite();
  ended.write(10);
  ended.staging.stop(true);
  assert.deepEqual(ranges(ended.parts).at(-1), [stageAfterAtoms, stageAfterAtoms + 10]);

  const failed = harness();
  failed.write(stageAfterAtoms);
  failed.staging.afterWrite();
  failed.write(10);
  failed.staging.stop(false);
  assert.equal(failed.parts.length, stageAfterAtoms / atomsPerPart);

  const small = harness();
  small.write(10);
  small.staging.stop(true);
  assert.equal(small.parts.length, 0, "a run that staged nothing stages nothing at its end");

  const late = harness();
  late.write(stageAfterAtoms);
  late.staging.afterWrite();
  late.tick(stageForMs + 1);
  late.write(stageAfterAtoms);
  late.staging.afterWrite();
  late.staging.stop(true);
  assert.equal(late.parts.length, stageAfterAtoms / atomsPerPart);
});

test("a part refused stops the run's staging", async () => {
  const { parts, staging, write } = harness(() => false);
  write(stageAfterAtoms);
  staging.afterWrite();
  const sent = parts.length;
  await new Promise((resolve) => setImmediate(resolve));
  write(stageAfterAtoms);
  staging.afterWrite();
  staging.stop(true);
  assert.equal(parts.length, sent);
});

test("at most partsInFlight parts go unanswered; the writes past them go once parts are answered", async () => {
  const doc = new LoroDoc();
  doc.setPeerId(9);
  const parts: Uint8Array[] = [];
  const answers: (() => void)[] = [];
  const staging = runStaging(
    doc,
    (part) => {
      parts.push(part);
      return new Promise((resolve) => answers.push(() => resolve({ staged: true })));
    },
    planCommit,
  );
  const map = doc.getMap("m");
  const write = (atoms: number) => {
    for (let index = 0; index < atoms; index++) map.set(`k${map.size}`, index);
  };
  write((partsInFlight + 4) * atomsPerPart);
  staging.afterWrite();
  assert.equal(parts.length, partsInFlight);
  write(stageAfterAtoms);
  staging.afterWrite();
  assert.equal(parts.length, partsInFlight, "none more while all are unanswered");

  for (const answer of answers.splice(0)) answer();
  await new Promise((resolve) => setImmediate(resolve));
  staging.afterWrite();
  const total = (partsInFlight + 4) * atomsPerPart + stageAfterAtoms;
  // The parts follow one another, none skipped.
  assert.deepEqual(
    ranges(parts),
    Array.from({ length: total / atomsPerPart }, (_, index) => [
      index * atomsPerPart,
      (index + 1) * atomsPerPart,
    ]),
  );
});
