/**
 * After a commit, the host worker keeping the document takes the committed plan between runs (ADR
 * 0498), not inside the next run: and the next run, opened at once or later, reads every row the
 * commit changed as committed — on a document read whole and on one read on demand from the server.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Logger } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc, type LoroMap } from "loro-crdt";
import type { DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
before(async () => {
  harness = await startHarness();
});
after(() => harness.close());

/** Every clip's speed set to `speed`, in pages of updates: one write per clip. */
const setEverySpeed = (speed: number) => `const clips = entities.list({ entityKind: 'clip', limit: 5000 });
entities.updateMany(clips.map((clip) => ({ entityId: clip.entityId, ops: [{ op: 'set', path: ['speed'], value: ${speed} }] })));
console.log(clips.length);`;
/** How many clips there are, and how many of them do not have `speed`. */
const countOthers = (speed: number) => `const clips = entities.list({ entityKind: 'clip', limit: 5000 });
console.log(clips.length, clips.filter((clip) => clip.payload.speed !== ${speed}).length);`;

function ok(result: DocScriptResult): Record<string, unknown> {
  assert.ok(result.ok, JSON.stringify(result).slice(0, 400));
  return result as unknown as Record<string, unknown>;
}
const logsOf = (result: Record<string, unknown>) =>
  (result.logs as { text: string }[]).map((line) => line.text);

function debugLog(): { logger: Logger; caughtUp: () => number } {
  let caughtUp = 0;
  const ignore = () => {};
  return {
    logger: {
      debug(message: string) {
        if (message.includes("catching up with its replica between runs")) caughtUp++;
      },
      info: ignore,
      warn: ignore,
      error: ignore,
    } as Logger,
    caughtUp: () => caughtUp,
  };
}

for (const [reads, readWholeUpTo] of [
  ["read whole", Number.POSITIVE_INFINITY],
  ["read on demand", 50],
] as const) {
  describe(`a run after a large commit, the document ${reads}`, { timeout: 600_000 }, () => {
    test("reads every changed row as committed, whether it opens at once or later", async () => {
      const docId = `caught-up-${reads.replaceAll(" ", "-")}`;
      await harness.createDocument(docId, 400);
      const log = debugLog();
      const tool = harness.tool({ logger: log.logger, sandbox: { readWholeUpTo } });
      const run = (script: string) => tool.handle({ op: "run-edit-script", doc_id: docId, script });
      const commit = async (script: string) => {
        const planned = ok(await run(script));
        const committed = ok(
          await tool.handle({ op: "commit-plan", doc_id: docId, plan_id: planned.plan_id as string }),
        );
        assert.equal(committed.status, "committed");
        return Number(logsOf(planned)[0]);
      };
      const [clipCount] = logsOf(ok(await run(countOthers(2))))
        .join()
        .split(" ")
        .map(Number);
      assert.ok((clipCount ?? 0) > 400, `the document has ${clipCount} clips`);

      // A commit of every clip's speed: the host worker takes it after the commit is answered, with no
      // call to prompt it (ADR 0516: the tool's replica takes the plan once the answer is out).
      assert.equal(await commit(setEverySpeed(2)), clipCount);
      const deadline = Date.now() + underLoadMs(10_000);
      while (log.caughtUp() === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.ok(log.caughtUp() >= 1, "the host worker was not sent the committed plan between runs");
      // The next run, opened at once: it waits for the catch-up and reads every clip as committed.
      assert.deepEqual(logsOf(ok(await run(countOthers(2)))), [`${clipCount} 0`]);

      // Again, and this time another user commits a clip's volume before the next run: it reads both.
      await commit(setEverySpeed(3));
      const firstClip = logsOf(
        ok(await run("console.log(entities.list({ entityKind: 'clip', limit: 1 })[0].entityId);")),
      )[0]!;
      const theirs = new LoroDoc();
      await harness.client.pullInto(docId, theirs);
      const since = theirs.oplogVersion();
      const row = theirs.getMap("entities").get(firstClip) as LoroMap;
      (row.get("fields") as LoroMap).set("volume", -6);
      theirs.commit();
      const pushed = await harness.client.push(docId, theirs.export({ mode: "update", from: since }));
      assert.equal(pushed.status, "committed", JSON.stringify(pushed));
      assert.deepEqual(logsOf(ok(await run(countOthers(3)))), [`${clipCount} 0`]);
      assert.deepEqual(logsOf(ok(await run(`console.log(entities.get('${firstClip}').payload.volume);`))), [
        "-6",
      ]);
      const read = await harness.read(docId);
      const clips = read.entities.filter((entity) => entity.entityKind === "clip");
      assert.equal(clips.length, clipCount);
      assert.ok(clips.every((clip) => clip.payload.speed === 3));
    });
  });
}
