import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";
import { interpretDocument } from "./interpret.ts";

const hostOnly = (error: unknown) => DocScriptError.isInstance(error) && error.code === "host_only_field";

it("asHost() writes host-only fields through the same session; the script's session still may not", () => {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema, { role: "script" });
  const audio = session.entities.create({ entityKind: "audio", payload: { system: "files", key: "a.mp3" } });
  const storageKey = [{ op: "set" as const, path: ["storageKey"], value: "store/a.mp3" }];
  assert.throws(() => session.entities.update(audio.entityId, storageKey), hostOnly);
  const host = session.asHost();
  assert.equal(host.entities.update(audio.entityId, storageKey).payload.storageKey, "store/a.mp3");
  // The script's session reads the host's write (one document, one index) and is still refused.
  assert.equal(session.entities.get(audio.entityId)?.payload.storageKey, "store/a.mp3");
  assert.throws(
    () => session.entities.update(audio.entityId, [{ op: "set", path: ["digest"], value: "sha256:x" }]),
    hostOnly,
  );
  // A host write that throws leaves the script's role as it was.
  assert.throws(() => host.entities.update("no-such-entity", storageKey));
  assert.throws(() => session.entities.update(audio.entityId, storageKey), hostOnly);
  // Its write is in the session's changed scope, and the session reads as a fresh read of the document.
  assert.ok([...session.changedScope().entityIds].includes(audio.entityId));
  doc.commit();
  const fresh = interpretDocument(doc, timelineSchema);
  assert.deepEqual(session.entities.list(), fresh.entities);
});
