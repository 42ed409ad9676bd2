/** The whole prompt a host hands the model: workflow, execution rules, the contract and worked scripts. */

import type { Schema } from "../schema/define-schema.ts";
import { describeSchema } from "./describe-schema.ts";
import { maxReadItems } from "./run-session.ts";
import { scriptContract } from "./script-contract.ts";

/** Worked scripts, each runnable as written on the sample timeline. */
export const workedScripts: readonly { readonly title: string; readonly script: string }[] = [
  {
    title: "Turn the background music down",
    script: `const bgm = entities.list().find((e) => e.entityKind === 'track' && e.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
entities.update(held.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: -6 }]);`,
  },
  {
    title: "Add a caption clip at 3 s for 2 s on the caption track",
    script: `const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
const caption = entities.create({ entityKind: 'caption', payload: { text: 'Welcome!' } });
const clip = entities.create({ entityKind: 'clip' });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 3000, durationMs: 2000 } });
relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: track.entityId, endpoint1EntityId: clip.entityId });`,
  },
  {
    title: "Fix a caption's typo, and handle a refused write",
    script: `for (const caption of entities.list({ entityKind: 'caption' })) {
  const at = String(caption.payload.text).indexOf('Helo');
  if (at >= 0) entities.update(caption.entityId, [{ op: 'splice', path: ['text'], index: at + 3, insert: 'l' }]);
}
const [music] = entities.list({ entityKind: 'audio' });
try {
  entities.update(music.entityId, [{ op: 'set', path: ['storageKey'], value: 'elsewhere' }]);
} catch (error) {
  console.log(error.code, error.message); // refused at the call: nothing of this write landed
}`,
  },
  {
    title: "Shift every clip starting from 0.5 s by 2 s: a window read in pages, one updateMany per page",
    script: `let after;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 500 }, limit: 5000, after });
  if (page.length === 0) break;
  entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: m.payload.startMs + 2000 }] })));
  after = page[page.length - 1].entityId;
}`,
  },
];

export interface PromptInput {
  readonly toolName: string;
  readonly docId: string;
  readonly version: string;
  /** Whether the document changed since the previous call with the same context; null on the first. */
  readonly changed: boolean | null;
  readonly timeoutMs: number;
  /** A plan whose commit is unconfirmed: the model must retry it before anything else. */
  readonly unconfirmedPlanId?: string;
  /** The document's schema, described in the prompt (kinds, fields with bounds, relation kinds). */
  readonly schema?: Schema;
}

export function renderPrompt(input: PromptInput): string {
  const change =
    input.changed === null
      ? "This is the first look at it in this conversation: take a snapshot before you edit."
      : input.changed
        ? "It CHANGED since your previous call: what you read before may be stale; take a fresh snapshot."
        : "It has not changed since your previous call.";
  const pending =
    input.unconfirmedPlanId === undefined
      ? ""
      : `\nThe commit of plan \`${input.unconfirmedPlanId}\` is UNCONFIRMED: retry commit-plan with that plan_id before anything else on this document.`;
  const examples = workedScripts.map((example) => `// ${example.title}\n${example.script}`).join("\n\n");
  return `You edit document "${input.docId}" with the \`${input.toolName}\` tool, by writing a JavaScript edit script that runs in a sandbox.

## Workflow
1. \`{ "op": "snapshot", "doc_id" }\` returns one page (at most 4000 tokens) of entities, then relations, in id order, with the version, whole-document \`total\` and query \`matched\` counts, what \`remaining\` and a \`next_cursor\` when there is more: send the same query with \`"cursor"\` to go on. Narrow it with \`kinds\`, \`ids\`, \`related_to\` (an entity: what it is related to, and those relations), \`relation_kinds\`, \`include\` (\`entities\`/\`relations\`), \`fields\` (payload fields to show) and, on timelines, \`from_ms\`/\`to_ms\` (clips and markers playing in that window). Long values read shortened (\`elided\` counts them); a script reads them whole. It never changes the document.
2. \`{ "op": "run-edit-script", "doc_id", "script", "timeout_ms"?, "auto_commit"? }\` runs the script on the current document and returns \`preview\` (counts, then one entry per changed entity or relation: an update's fields as \`before\` → \`after\`, long strings and lists shortened with counts; \`omitted\` counts entries left out; \`unreferenced\` names entities your deletes leave with no relation), \`logs\` (the first lines within 1000 tokens; \`logs_omitted\` counts the rest) and a \`plan_id\`. Nothing is published unless \`auto_commit\` is true.
3. Read the preview; \`{ "op": "commit-plan", "doc_id", "plan_id" }\` publishes the plan. Edits others made meanwhile merge. A commit ends as:
   - \`committed\` (\`duplicate: true\`: it had been applied already; nothing was applied twice);
   - \`conflicted\`: some writes would lose a change another client committed after the version you read (it changed the same field or text, deleted what you write, or changed what you delete, or the merge breaks a constraint): one reason per write. With \`applied: false\` NOTHING was published: take a fresh snapshot, then run a new script, or commit the same plan_id with \`"apply_remaining": true\` to publish the writes that still apply;
   - \`unconfirmed\`: the push was not confirmed; retry commit-plan with the SAME plan_id (it resends the same change, never re-runs the script); until it resolves, no other op on this document is taken;
   - \`rejected\`: the server refused it; the next call reads the document afresh.
   If a commit-plan call got no answer at all (the tool or its host restarted), call commit-plan again with the same plan_id: the server knows whether the plan was applied, and the answer says \`committed\` (\`duplicate: true\`) or \`plan_not_found\` (never applied: run the script again).
4. History: \`{ "op": "plan-diff", "doc_id", "plan_id" }\` reads what a committed plan changed, as a preview reads (counts whole, entries within the budget). \`{ "op": "revert-plan", "doc_id", "plan_id", "auto_commit"? }\` makes a NEW plan that undoes a committed one and answers like run-edit-script (its own \`plan_id\` and \`preview\`); publish it with commit-plan. It is made on the version the undone plan left: if anyone changed what it puts back since, its commit is \`conflicted\` and nothing is published.

## Execution rules
- The script is the body of an async function: \`await\` works, \`return\` ends it. Only \`entities\`, \`relations\` and \`console\` exist: no network, storage, timers, \`import()\`, \`eval\` or \`Function\`, no typed arrays.
- It stops after \`timeout_ms\` (default and most ${input.timeoutMs}: a larger value is that) counted from its start, or at its memory ceiling; then nothing is published. An error names the script's \`line\`, \`column\` and \`sourceLine\` in \`error.data\`; a refused write's \`issues\` give each path, constraint, message and the \`value\` you gave.
- Reads are assembled (a variant reads with its base applied) and are copies: changing a returned object changes nothing. One read (\`entities.list\`, \`relations.list\`, \`relations.of\`) answers at most ${maxReadItems} items; one that would answer more throws \`read_limit\`: read in pages (\`entities.list({ entityKind, limit, after })\` with \`after\` the last \`entityId\` of the previous page; \`relations.list({ relationKind, entityId, limit, after })\` with \`after\` the last \`relationId\`; writing or deleting what a page read never makes the next page skip or repeat), filter by kind, or read by id.
- Many entities: read them by kind and window (\`entities.list({ entityKind, range: { field, from, to } })\`) and write each page with one \`entities.updateMany\` (all or none), not an \`update\` per entity.
- Every write lands whole or not at all and is checked as it lands: a refused write throws a \`DocScriptError\` at the call that made it (\`error.code\`, \`error.message\`, \`error.data.issues\`). Catch it to try another way, or let it end the run.
- List members are addressed by index; \`splice\` on text counts code points.
- A Clip is assembled from a \`clip\`, a \`sequence-marker\` and content, linked with \`marker\` and \`contain\`; the document stores the marker and the content on the clip's row, so the plan is refused until each clip has both. A track holds its clips with \`contain\`, in order.
- A caption has no length of its own (\`durationMs\` is null): its clip's marker decides how long it shows, so that marker states a \`durationMs\`.
- \`delete\` never cascades, except that a clip takes its own sequence-marker with it.
- A medium is its stored file (\`system\`, \`key\`): \`entities.create\` returns the one the document already has. \`storageKey\` and \`digest\` are the host's facts; a script that writes them is refused. \`materialize\` reads a medium's file (or a transcript's transcription file) and writes nothing: state what you take from it yourself, such as a take's \`durationMs\`.
- For a \`phonetic-script\`, set \`phonemeScript\` to the raw phoneme text: the host stores it as a file and records that file.
- Once the script ends, the plan is checked as a whole; a failure is an error of the run, and nothing is published.

## The contract
\`\`\`ts
${scriptContract}\`\`\`
${input.schema === undefined ? "" : `\n## The schema\n${describeSchema(input.schema)}\n`}
## Worked scripts
\`\`\`js
${examples}
\`\`\`

## The document
Version \`${input.version}\`. ${change}${pending}
`;
}
