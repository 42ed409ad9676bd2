/** The host's own check of what a run asks of the file hooks, whatever the worker sends. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { assetEntity, fileKeyProblem, maxUploadTextChars, uploadTextOf } from "./asset-hooks.ts";

function documentWithMusic(): LoroDoc {
  const doc = new LoroDoc();
  const row = doc.getMap("entities").setContainer("audio-1", new LoroMap());
  row.set("kind", "audio");
  const fields = row.setContainer("fields", new LoroMap());
  fields.set("system", "files");
  fields.set("key", "music.mp3");
  doc.commit();
  return doc;
}

test("file keys: plain relative names pass; traversal, absolute paths, URLs and encodings do not", () => {
  for (const key of ["music.mp3", "takes/2024/take-2.wav", "a b.png", "_x", "Café.wav", "録音.wav"])
    assert.equal(fileKeyProblem(key), undefined, key);
  for (const key of [
    "",
    "../x",
    "a/../../x",
    "/etc/passwd",
    "~/x",
    "http://169.254.169.254/",
    "file:x",
    "C:x",
    "a\\b",
    "a//b",
    "a/./b",
    "a/%2e%2e/b",
    "a\u0000b",
    "x".repeat(513),
    ".hidden",
    "a/.env",
    "a/b.",
    "a ",
    "a%00b",
    "a:b",
    "a\u202eb.gp3",
    "Cafe\u0301.wav",
    "a\ud800",
    `${"x".repeat(129)}.wav`,
    Array.from({ length: 17 }, () => "d").join("/"),
    "a?b",
    "a#b",
    "a*b",
  ])
    assert.notEqual(fileKeyProblem(key), undefined, JSON.stringify(key));
});

test("an entity the document holds reaches the hook as the document has it, whatever the run sent", () => {
  const doc = documentWithMusic();
  const entity = assetEntity(doc, {
    entityId: "audio-1",
    entityKind: "audio",
    payload: { system: "files", key: "../../etc/passwd" },
  });
  assert.deepEqual(entity, {
    entityId: "audio-1",
    entityKind: "audio",
    payload: { system: "files", key: "music.mp3" },
  });
});

test("a new entity is refused unless of a stored-file kind with a plain key", () => {
  const doc = documentWithMusic();
  assert.throws(
    () =>
      assetEntity(doc, {
        entityId: "img-9",
        entityKind: "image",
        payload: { system: "files", key: "../secret" },
      }),
    /asset|segment/,
  );
  assert.throws(
    () => assetEntity(doc, { entityId: "t-1", entityKind: "track", payload: {} }),
    /names no stored file/,
  );
  assert.throws(() => assetEntity(doc, "audio-1"), /takes an entity/);
  const fresh = assetEntity(doc, {
    entityId: "img-9",
    entityKind: "image",
    payload: { system: "files", key: "shot.png" },
    extra: 1,
  });
  assert.deepEqual(fresh, {
    entityId: "img-9",
    entityKind: "image",
    payload: { system: "files", key: "shot.png" },
  });
});

test("uploadText takes text up to its bound", () => {
  assert.equal(uploadTextOf({ text: "h ə" }), "h ə");
  assert.throws(() => uploadTextOf({ text: "x".repeat(maxUploadTextChars + 1) }), /at most/);
  assert.throws(() => uploadTextOf({ text: 1 }), /takes text/);
});
