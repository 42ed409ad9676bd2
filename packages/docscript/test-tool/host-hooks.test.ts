/** Stored files and host-only hooks: materialize, file facts before every plan, uploadText, loadGenerationFacts. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Entity } from "../src/schema/types.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
let documents = 0;

async function freshDocument(): Promise<string> {
  const docId = `hooks-${++documents}`;
  await harness.createDocument(docId);
  return docId;
}

function entityWithKey(document: Awaited<ReturnType<Harness["read"]>>, key: string): Entity | undefined {
  return document.entities.find((entity) => entity.payload.key === key);
}

before(async () => {
  harness = await startHarness();
});
after(async () => {
  await harness.close();
});

describe("stored files and host hooks: materialize and file facts", () => {
  test("materialize reads a medium's file through loadEntityAsset and writes nothing of it", async () => {
    const docId = await freshDocument();
    const reads: string[] = [];
    const tool = harness.tool({
      loadEntityAsset: (id, entity) => {
        reads.push(`${id}:${String(entity.payload.key)}`);
        return { content: { durationMs: 61234, sampleRate: 48000 } };
      },
    });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      auto_commit: true,
      script: `const [music] = entities.list({ entityKind: 'audio' });
const file = await entities.materialize(music.entityId);
console.log(file.assetId, file.content.sampleRate);
entities.update(music.entityId, [{ op: 'set', path: ['durationMs'], value: file.content.durationMs }]);`,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    assert.deepEqual(
      run.logs.map((line) => line.text),
      ["music.mp3 48000"],
    );
    const music = entityWithKey(await harness.read(docId), "music.mp3");
    assert.equal(music?.payload.durationMs, 61234);
    assert.equal("sampleRate" in (music?.payload ?? {}), false);
    // Once by the script, once before the plan (the medium changed).
    assert.deepEqual(reads, [`${docId}:music.mp3`, `${docId}:music.mp3`]);
  });

  test("a new medium's file is read before the plan and its facts are recorded where none are stated", async () => {
    const docId = await freshDocument();
    const reads: string[] = [];
    const tool = harness.tool({
      loadEntityAsset: (_id, entity) => {
        reads.push(String(entity.payload.key));
        return { content: null, storageKey: `store/${String(entity.payload.key)}`, digest: "sha256:take" };
      },
    });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      auto_commit: true,
      script: `entities.create({ entityKind: 'voiceover-recording', payload: { system: 'speech', key: 'take-2.wav' } });
entities.create({ entityKind: 'audio', payload: { system: 'files', key: 'music.mp3' } }); // the document already holds it`,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    assert.equal(run.preview.counts.created, 1);
    assert.deepEqual(reads, ["take-2.wav"]);
    const take = entityWithKey(await harness.read(docId), "take-2.wav");
    assert.equal(take?.payload.storageKey, "store/take-2.wav");
    assert.equal(take?.payload.digest, "sha256:take");
  });

  test("without loadEntityAsset only sound without a storageKey fails; a file the store cannot read stops the plan", async () => {
    const docId = await freshDocument();
    const bare = harness.tool();
    const image = await bare.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `entities.create({ entityKind: 'image', payload: { system: 'files', key: 'poster.png' } });`,
    });
    assert.equal(image.ok, true, JSON.stringify(image));
    const sound = await bare.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `entities.create({ entityKind: 'audio', payload: { system: 'files', key: 'new.mp3' } });`,
    });
    assert.ok(!sound.ok);
    assert.equal(sound.error.code, "runtime");
    assert.match(sound.error.message, /storageKey/);
    const unreadable = harness.tool({
      loadEntityAsset: () => {
        throw new Error("no such object in the bucket");
      },
    });
    const stopped = await unreadable.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `entities.create({ entityKind: 'image', payload: { system: 'files', key: 'lost.png' } });`,
    });
    assert.ok(!stopped.ok);
    assert.match(stopped.error.message, /cannot read its file: no such object/);
    assert.equal(entityWithKey(await harness.read(docId), "lost.png"), undefined);
  });
});

describe("stored files and host hooks: refusals and failed reads", () => {
  test("a script that writes storageKey or digest is refused at the call", async () => {
    const docId = await freshDocument();
    const tool = harness.tool({
      loadEntityAsset: () => ({ content: null, storageKey: "store/x", digest: "d" }),
    });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `for (const payload of [{ system: 'files', key: 'a.mp3', storageKey: 'mine' }, { system: 'files', key: 'b.mp3', digest: 'mine' }]) {
  try { entities.create({ entityKind: 'audio', payload }); console.log('created'); } catch (error) { console.log(error.code); }
}`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    assert.deepEqual(
      run.logs.map((line) => line.text),
      ["host_only_field", "host_only_field"],
    );
    assert.equal(run.preview.writes, 0);
  });

  test("a read the script awaited reports its failure to the script; one it left unhandled stops the plan", async () => {
    const docId = await freshDocument();
    const tool = harness.tool({
      loadEntityAsset: (_id, entity) => {
        if (entity.entityKind === "video") throw Object.assign(new Error("gone"), { code: "not_found" });
        return { content: "ok" };
      },
    });
    const awaited = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `const [video] = entities.list({ entityKind: 'video' });
try { await entities.materialize(video.entityId); } catch (error) { console.log('caught', error.code, error.message); }`,
    });
    assert.ok(awaited.ok && awaited.op === "run-edit-script", JSON.stringify(awaited));
    assert.deepEqual(
      awaited.logs.map((line) => line.text),
      ["caught not_found gone"],
    );
    const unhandled = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `const [video] = entities.list({ entityKind: 'video' });
entities.materialize(video.entityId);
const [music] = entities.list({ entityKind: 'audio' });
await entities.materialize(music.entityId);`,
    });
    assert.ok(!unhandled.ok);
    assert.equal(unhandled.error.code, "runtime");
    assert.match(unhandled.error.message, /did not handle/);
  });
});

describe("stored files and host hooks: uploadText and loadGenerationFacts", () => {
  test("uploadText stores a phonetic script's phoneme text and the plan records the file", async () => {
    const docId = await freshDocument();
    const uploads: string[] = [];
    const tool = harness.tool({
      uploadText: (_id, text) => {
        uploads.push(text);
        return { system: "files", key: `phonemes-${uploads.length}`, digest: "sha256:p" };
      },
    });
    const script = `const [caption] = entities.list({ entityKind: 'caption' });
const phonetics = entities.create({ entityKind: 'phonetic-script', payload: { text: 'Hello', phonemeScript: 'h ə ˈl oʊ' } });
relations.link({ relationKind: 'phonetics-of', endpoint0EntityId: phonetics.entityId, endpoint1EntityId: caption.entityId });`;
    const run = await tool.handle({ op: "run-edit-script", doc_id: docId, script, auto_commit: true });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    assert.deepEqual(uploads, ["h ə ˈl oʊ"]);
    const phonetics = (await harness.read(docId)).entities.find(
      (entity) => entity.entityKind === "phonetic-script",
    );
    assert.deepEqual(phonetics?.payload.phonemeScript, { system: "files", key: "phonemes-1" });
    const without = await harness.tool().handle({ op: "run-edit-script", doc_id: docId, script });
    assert.ok(!without.ok);
    assert.match(without.error.message, /uploadText/);
  });

  test("loadGenerationFacts links created media to their sources after a commit; its failure is a warning", async () => {
    const docId = await freshDocument();
    const asked: string[][] = [];
    const tool = harness.tool({
      peerId: 4242,
      loadEntityAsset: () => ({ content: null, storageKey: "store/generated", digest: "sha256:g" }),
      loadGenerationFacts: (_id, keys) => {
        asked.push([...keys]);
        return [
          { outputAssetId: "remix.mp3", inputAssetIds: ["music.mp3", "not-in-the-document.mp3"] },
          { outputAssetId: "elsewhere.mp3", inputAssetIds: ["music.mp3"] },
        ];
      },
    });
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      auto_commit: true,
      script: `entities.create({ entityKind: 'audio', payload: { system: 'files', key: 'remix.mp3', name: 'Remix' } });`,
    });
    assert.ok(
      run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
      JSON.stringify(run),
    );
    assert.deepEqual(asked, [["remix.mp3"]]);
    const document = await harness.read(docId);
    const remix = entityWithKey(document, "remix.mp3");
    const music = entityWithKey(document, "music.mp3");
    const derived = document.relations.filter((relation) => relation.relationKind === "derived-from");
    assert.deepEqual(
      derived.map((relation) => [relation.endpoint0EntityId, relation.endpoint1EntityId]),
      [[remix?.entityId, music?.entityId]],
    );
    const failing = harness.tool({
      loadEntityAsset: () => ({ content: null, storageKey: "store/generated", digest: "sha256:g" }),
      loadGenerationFacts: () => {
        throw new Error("generation service down");
      },
    });
    const warned = await failing.handle({
      op: "run-edit-script",
      doc_id: docId,
      auto_commit: true,
      script: `entities.create({ entityKind: 'audio', payload: { system: 'files', key: 'remix-2.mp3' } });`,
    });
    assert.ok(
      warned.ok && warned.op === "run-edit-script" && warned.commit?.status === "committed",
      JSON.stringify(warned),
    );
    assert.match(
      warned.commit.status === "committed" ? (warned.commit.warnings[0] ?? "") : "",
      /generation service down/,
    );
  });
});
