/**
 * Hooks take ids, not strings from the script: `loadEntityAsset` is asked only about entities of the run's
 * own document of a stored-file kind, with the key the document holds; a key a script introduces that is
 * a path out of the store or a URL never reaches the hook. `uploadText` is bounded, and what it stored is
 * staged with the plan: discarded when the plan fails or is dropped unpublished, kept once it commits.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { UploadedText } from "../src/tool/host-hooks.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
let documents = 0;

async function freshDocument(): Promise<string> {
  const docId = `hook-boundary-${++documents}`;
  await harness.createDocument(docId);
  return docId;
}

before(async () => {
  harness = await startHarness();
});
after(async () => {
  await harness.close();
});

describe("the file hooks take what the document says: loadEntityAsset", () => {
  test("keys that leave the store or name a URL are refused at the script's call and never reach loadEntityAsset", async () => {
    const docId = await freshDocument();
    const asked: string[] = [];
    const tool = harness.tool({
      loadEntityAsset: (_docId, entity) => {
        asked.push(String(entity.payload.key));
        return { content: null, storageKey: "store/x", digest: "sha256:x" };
      },
    });
    for (const key of [
      "../../../../etc/passwd",
      "/etc/passwd",
      "http://169.254.169.254/latest/meta-data/",
      "file:///etc/passwd",
      "C:\\Windows\\win.ini",
      "media/%2e%2e/secret",
      "media/./x.png",
    ]) {
      const run = await tool.handle({
        op: "run-edit-script",
        doc_id: docId,
        script: `entities.create({ entityKind: 'image', payload: { system: 'files', key: ${JSON.stringify(key)} } });`,
      });
      assert.equal(run.ok, false, `${key}: ${JSON.stringify(run)}`);
      assert.ok(!run.ok && JSON.stringify(run.error).includes("file_key_refused"), JSON.stringify(run));
    }
    assert.deepEqual(asked, [], "a refused key reached the host's hook");
    const before = await harness.read(docId);
    assert.ok(!before.entities.some((entity) => String(entity.payload.key).includes("passwd")));
  });

  test("materialize hands the hook the document's own entity, and only of a stored-file kind", async () => {
    const docId = await freshDocument();
    const asked: { id: string; key: unknown; kind: string }[] = [];
    const tool = harness.tool({
      loadEntityAsset: (id, entity) => {
        asked.push({ id, key: entity.payload.key, kind: entity.entityKind });
        return { content: "bytes" };
      },
    });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `const [music] = entities.list({ entityKind: 'audio' });
const read = await entities.materialize(music.entityId);
console.log(read.assetId);
const [track] = entities.list({ entityKind: 'track' });
try { await entities.materialize(track.entityId); } catch (error) { console.log(error.code); }
try { await entities.materialize("../../etc/passwd"); } catch (error) { console.log(error.code, error.data.resource); }`,
    });
    assert.ok(run.ok, JSON.stringify(run));
    assert.deepEqual(run.ok && run.op === "run-edit-script" && run.logs.map((line) => line.text), [
      "music.mp3",
      "not_a_file",
      "not_found entity",
    ]);
    assert.deepEqual(asked, [{ id: docId, key: "music.mp3", kind: "audio" }]);
  });
});

describe("the file hooks take what the document says: uploadText", () => {
  test("an upload is bounded, staged with its plan, discarded when the plan is dropped or fails, kept once committed", async () => {
    const docId = await freshDocument();
    const stored: string[] = [];
    const discarded: string[] = [];
    const tool = harness.tool({
      maxPlans: 1,
      uploadText: (_docId, text) => {
        const upload: UploadedText = {
          system: "files",
          key: `phonemes-${stored.length + 1}`,
          digest: "sha256:p",
        };
        stored.push(`${upload.key}:${text}`);
        return upload;
      },
      discardUpload: (_docId, upload) => {
        discarded.push(upload.key);
      },
    });
    const phonetics = (
      text: string,
      expression = JSON.stringify(text),
    ) => `const [caption] = entities.list({ entityKind: 'caption' });
const phonetics = entities.create({ entityKind: 'phonetic-script', payload: { text: 'Hello', phonemeScript: ${expression} } });
relations.link({ relationKind: 'phonetics-of', endpoint0EntityId: phonetics.entityId, endpoint1EntityId: caption.entityId });`;

    const tooLarge = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: phonetics("", `'ə'.repeat(${256 * 1024 + 1})`),
    });
    assert.ok(
      !tooLarge.ok && JSON.stringify(tooLarge.error).includes("upload_too_large"),
      JSON.stringify(tooLarge).slice(0, 400),
    );
    assert.deepEqual(stored, [], "an upload past the bound reached the host");

    // A plan never committed: the next run's plan evicts it (maxPlans 1), and its upload is discarded.
    const first = await tool.handle({ op: "run-edit-script", doc_id: docId, script: phonetics("h ə") });
    assert.ok(first.ok, JSON.stringify(first).slice(0, 400));
    assert.deepEqual(discarded, []);
    const second = await tool.handle({ op: "run-edit-script", doc_id: docId, script: phonetics("l oʊ") });
    assert.ok(second.ok && second.op === "run-edit-script");
    assert.deepEqual(discarded, ["phonemes-1"], "the dropped plan's upload was not collected");

    // A committed plan's upload is durable.
    const planId = second.ok && second.op === "run-edit-script" ? second.plan_id : "";
    const committed = await tool.handle({ op: "commit-plan", doc_id: docId, plan_id: planId });
    assert.ok(
      committed.ok && committed.op === "commit-plan" && committed.status === "committed",
      JSON.stringify(committed),
    );

    // A run whose plan is refused after its upload was stored (a sound file with no storage key, and
    // no loadEntityAsset to find one) discards the upload at once.
    const refusedPlan = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `${phonetics("f a")}
entities.create({ entityKind: 'audio', payload: { system: 'files', key: 'new-music.mp3' } });`,
    });
    assert.ok(
      !refusedPlan.ok && JSON.stringify(refusedPlan.error).includes("storage_key_missing"),
      JSON.stringify(refusedPlan).slice(0, 400),
    );
    assert.deepEqual(discarded, ["phonemes-1", "phonemes-3"]);

    // Later plans evict the committed one: its upload stays.
    const later = await tool.handle({ op: "run-edit-script", doc_id: docId, script: "console.log(1);" });
    assert.ok(later.ok);
    const again = await tool.handle({ op: "run-edit-script", doc_id: docId, script: "console.log(2);" });
    assert.ok(again.ok);
    assert.deepEqual(discarded, ["phonemes-1", "phonemes-3"], "a committed plan's upload was discarded");
    assert.deepEqual(stored, ["phonemes-1:h ə", "phonemes-2:l oʊ", "phonemes-3:f a"]);
  });
});
