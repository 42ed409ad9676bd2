import assert from "node:assert/strict";
import { test } from "node:test";
import { countTokens } from "@tackle/core/tokens";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { describeSchema, schemaPromptBudget } from "./describe-schema.ts";
import { renderPrompt } from "./prompt.ts";

test("the prompt carries the timeline's schema, every kind, field bound and relation, within its token budget", () => {
  const described = describeSchema(timelineSchema);
  const tokens = countTokens(described);
  assert.ok(tokens <= schemaPromptBudget, `the schema section takes ${tokens} tokens`);
  for (const kind of Object.keys(timelineSchema.entities))
    assert.match(described, new RegExp(`^- ${kind}[ :\\[]`, "m"));
  for (const [kind, spec] of Object.entries(timelineSchema.relations)) {
    assert.match(described, new RegExp(`^- ${kind}: `, "m"));
    for (const shape of spec.shapes) assert.ok(described.includes(shape.cardinality ?? "many-to-many"));
  }
  // Bounds a script must keep, named as the schema states them.
  assert.match(described, /text: text\(≤500 chars\)/, "a caption's text bound");
  assert.match(described, /startMs\??: integer 0\.\.86400000/, "a marker's time bound");
  assert.match(described, /contain: track → clip \(one-to-many, ordered\)/);
  const prompt = renderPrompt({
    toolName: "docscript",
    docId: "doc",
    version: "v",
    changed: null,
    timeoutMs: 30_000,
    schema: timelineSchema,
  });
  assert.ok(prompt.includes(described), "the prompt holds the section whole");
});
