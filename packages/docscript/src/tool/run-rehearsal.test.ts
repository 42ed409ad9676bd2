import assert from "node:assert/strict";
import { it } from "node:test";
import { defineSchema } from "../schema/define-schema.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { rehearseRun } from "./run-rehearsal.ts";

it("rehearses every kind of binding and the plan on the timeline, on a document of its own", async () => {
  const done = await rehearseRun(timelineSchema);
  assert.deepEqual([...done].sort(), [
    "entities.create",
    "entities.delete",
    "entities.get",
    "entities.list",
    "entities.update",
    "entities.updateMany",
    "finish",
    "relations.link",
    "relations.list",
    "relations.of",
    "relations.unlink",
  ]);
  // Again: nothing of the first rehearsal is left to find (its own cache and document each time).
  assert.deepEqual([...(await rehearseRun(timelineSchema))].sort(), [...done].sort());
});

it("never fails its worker: a schema whose every kind refuses an empty payload still rehearses reads", async () => {
  const strict = defineSchema({
    name: "strict",
    entities: { note: { fields: { text: { type: "string" } } } },
    relations: {},
  });
  const done = await rehearseRun(strict);
  assert.ok(done.has("entities.list") && done.has("finish"), [...done].join(", "));
  assert.ok(!done.has("entities.create"));
});
