import assert from "node:assert/strict";
import { test } from "node:test";
import { countTokens } from "@tackle/core/tokens";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { describeSchema } from "./describe-schema.ts";
import { promptBudget, renderPrompt, workedScripts } from "./prompt.ts";
import { scriptContract } from "./script-contract.ts";

/** The longest prompt the timeline's model gets: the document changed and a commit is unconfirmed. */
const longest = renderPrompt({
  toolName: "docscript",
  docId: "a-document-id-of-sixty-four-characters-as-a-host-might-name-one",
  changed: true,
  timeoutMs: 30_000,
  unconfirmedPlanId: "plan-0123456789abcdef0123456789abcdef",
  schema: timelineSchema,
});

test("the whole prompt of the timeline fits its token budget, counted with o200k_base", () => {
  const tokens = countTokens(longest);
  assert.ok(tokens <= promptBudget, `the prompt takes ${tokens} tokens, more than ${promptBudget}`);
  // What the model needs is all there: the contract, the schema, a bulk edit, the ops and the bounds.
  assert.ok(longest.includes(scriptContract), "the contract whole");
  assert.ok(longest.includes(describeSchema(timelineSchema)), "the schema whole");
  for (const example of workedScripts) assert.ok(longest.includes(example.script));
  assert.ok(
    workedScripts.some((example) => example.script.includes("entities.updateMany")),
    "a bulk edit",
  );
  for (const op of ["snapshot", "run-edit-script", "commit-plan", "plan-diff", "revert-plan"])
    assert.ok(longest.includes(`"op": "${op}"`) || longest.includes(`\`${op}\` (\`doc_id\``), op);
  for (const outcome of ["committed", "conflicted", "unconfirmed", "rejected", "apply_remaining"])
    assert.ok(longest.includes(outcome), outcome);
  assert.match(longest, /at most 20000 items, else throws `read_limit`/);
  assert.match(longest, /`timeout_ms` \(default and most 30000\)/);
  assert.match(longest, /CHANGED/);
  assert.match(longest, /plan-0123456789abcdef0123456789abcdef/);
});

test("the prompt carries the timeline's schema: every kind, field bound and relation with its cardinality", () => {
  const described = describeSchema(timelineSchema);
  for (const kind of Object.keys(timelineSchema.entities))
    assert.match(described, new RegExp(`^- (?:[\\w-]+, )*${kind}[ :\\[,]`, "m"), kind);
  for (const [kind, spec] of Object.entries(timelineSchema.relations)) {
    assert.match(described, new RegExp(`^- ${kind}: `, "m"));
    for (const shape of spec.shapes) assert.ok(described.includes(shape.cardinality ?? "many-to-many"));
  }
  // Bounds a script must keep, named as the schema states them.
  assert.match(described, /text: text\(≤500\)/, "a caption's text bound");
  assert.match(described, /startMs\??: integer 0\.\.86400000/, "a marker's time bound");
  assert.match(described, /contain: track → clip \(one-to-many, ordered\)/);
  assert.match(described, /- video, image, audio, voiceover-recording \[one per system\+key\]: system: /);
  assert.match(described, /storageKey: string\(≤1024\)\|null \(host-only\)/);
  assert.match(described, /caption-clip-has-duration/);
});
