/**
 * Through the tool, against real documents: a script that tries each escape class found against the
 * previous sandbox (an inspect hook thrown where the host handles errors, a FinalizationRegistry left
 * for a later run, a prototype trap on what the bridge sends, a callback kept on the global) ends with a
 * clear error, writes nothing to its document (auto_commit is on), reaches nothing of the host, and the
 * next run on another document succeeds and writes only what that run wrote.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Harness, musicVolume, startHarness, turnMusicDown } from "./harness.ts";

const directory = mkdtempSync(join(tmpdir(), "docscript-contained-"));
const marker = join(directory, "escaped");
let harness: Harness;

const reachProcess = `(depth, options, inspect) => {
  try { inspect.constructor("return process")().getBuiltinModule("fs").writeFileSync(${JSON.stringify(marker)}, "x"); } catch (_) {}
  return "x";
}`;

const attacks: Record<string, string> = {
  "a throwing toJSON trap with an inspect hook": `
    const thrown = { [Symbol.for("nodejs.util.inspect.custom")]: ${reachProcess} };
    Object.defineProperty(Object.prototype, "toJSON", { configurable: true, value() { if (this && this.code) throw thrown; return this; } });
    Promise.reject(new Error("unhandled"));
    const [music] = entities.list({ entityKind: 'audio' });
    await entities.materialize(music.entityId);
    throw thrown;`,
  "a FinalizationRegistry left for a later run": `
    const registry = new FinalizationRegistry(() => { entities.update(entities.list({ entityKind: 'clip' })[0].entityId, [{ op: 'set', path: ['volume'], value: 11 }]); });
    globalThis.keep = registry;
    for (let index = 0; index < 2000; index++) registry.register({ index }, index);`,
  "a forged bridge message": `
    Object.defineProperty(Object.prototype, "toJSON", { configurable: true, value() {
      return this && this.kind ? { kind: "call", binding: "constructor", method: "constructor", args: ["return process"] } : this;
    } });
    entities.list();
    delete Object.prototype.toJSON;
    throw new Error("stop after the forgery");`,
  "a callback kept on the global for the next run": `
    globalThis.later = () => entities.delete(entities.list({ entityKind: 'track' })[0].entityId);
    Object.prototype.poisoned = true;
    throw new Error("leave it behind");`,
};

describe("runs that try the found escape classes are contained", () => {
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness.close();
    rmSync(directory, { recursive: true, force: true });
  });

  test("a model's timeout_ms never raises the host's limit, and the next run is served", async () => {
    await harness.createDocument("contained-timeout");
    // The finish step counts against the run's limit (ADR 0478): the next run's plan must fit in it too.
    const tool = harness.tool({ sandbox: { timeoutMs: 2_000 } });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "contained-timeout",
      script: "while (true) {}",
      timeout_ms: 6000,
    });
    assert.ok(!run.ok && run.error.code === "timeout", JSON.stringify(run));
    assert.deepEqual(!run.ok && run.error.data, { timeoutMs: 2_000 });
    const next = await tool.handle({
      op: "run-edit-script",
      doc_id: "contained-timeout",
      script: turnMusicDown,
    });
    assert.ok(next.ok, JSON.stringify(next).slice(0, 400));
  });

  let documents = 0;
  for (const [name, script] of Object.entries(attacks)) {
    test(name, async () => {
      const attacked = `contained-a-${++documents}`;
      const other = `contained-b-${documents}`;
      await harness.createDocument(attacked);
      await harness.createDocument(other);
      const tool = harness.tool({ loadEntityAsset: () => ({ content: "bytes" }) });
      const before = JSON.stringify(await harness.read(attacked));
      const run = await tool.handle({ op: "run-edit-script", doc_id: attacked, script, auto_commit: true });
      assert.equal(run.ok, false, `the attack ended as a success: ${JSON.stringify(run).slice(0, 600)}`);
      assert.ok(!run.ok && run.error.code !== "sandbox_crashed", JSON.stringify(run).slice(0, 600));
      assert.ok(!run.ok && run.error.message.length > 0);
      assert.equal(existsSync(marker), false, "the script reached the host's process");
      assert.equal(JSON.stringify(await harness.read(attacked)), before, "the attacked document changed");
      const next = await tool.handle({
        op: "run-edit-script",
        doc_id: other,
        script: turnMusicDown,
        auto_commit: true,
      });
      assert.ok(
        next.ok && next.op === "run-edit-script" && next.commit?.status === "committed",
        JSON.stringify(next).slice(0, 600),
      );
      assert.equal(
        next.ok && next.op === "run-edit-script" && next.preview.writes,
        1,
        "the next run carried more writes",
      );
      assert.equal(musicVolume(await harness.read(other)), -6);
      const probe = await tool.handle({
        op: "run-edit-script",
        doc_id: other,
        script: `console.log(typeof globalThis.later, typeof globalThis.keep, ({}).poisoned === undefined);`,
      });
      assert.deepEqual(probe.ok && probe.op === "run-edit-script" && probe.logs.map((line) => line.text), [
        "undefined undefined true",
      ]);
    });
  }
});
