/**
 * The whole prompt a host hands the model: the ops, execution rules, the contract, the document's schema
 * and worked scripts, within `promptBudget` tokens for the timeline (`prompt.test.ts` counts them).
 */

import type { Schema } from "../schema/define-schema.ts";
import { describeSchema } from "./describe-schema.ts";
import { maxReadItems } from "./run-session.ts";
import { scriptContract } from "./script-contract.ts";

/** Worked scripts, each runnable as written on the sample timeline. */
export const workedScripts: readonly { readonly title: string; readonly script: string }[] = [
  {
    title: "A caption at 3 s for 2 s",
    script: `const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
const caption = entities.create({ entityKind: 'caption', payload: { text: 'Welcome!' } });
const clip = entities.create({ entityKind: 'clip' });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 3000, durationMs: 2000 } });
const link = (relationKind, from, to) => relations.link({ relationKind, endpoint0EntityId: from.entityId, endpoint1EntityId: to.entityId });
link('marker', clip, marker);
link('contain', clip, caption);
link('contain', track, clip);`,
  },
  {
    title: "Bulk edit: shift every clip from 0.5 s by 2 s",
    script: `let after;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 500 }, limit: 5000, after });
  if (page.length === 0) break;
  entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: m.payload.startMs + 2000 }] })));
  after = page.at(-1).entityId;
}`,
  },
];

/** The most tokens the whole prompt of the timeline may take, counted with `o200k_base`. */
export const promptBudget = 2500;

export interface PromptInput {
  readonly toolName: string;
  readonly docId: string;
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
        ? "It CHANGED since your previous call: what you read may be stale; snapshot again."
        : "It has not changed since your previous call.";
  const pending =
    input.unconfirmedPlanId === undefined
      ? ""
      : `\nPlan \`${input.unconfirmedPlanId}\` is UNCONFIRMED: commit it again before anything else.`;
  const examples = workedScripts.map((example) => `// ${example.title}\n${example.script}`).join("\n\n");
  return `You edit document "${input.docId}" with the \`${input.toolName}\` tool: a JavaScript edit script run in a sandbox.

## Ops
- \`{ "op": "snapshot", "doc_id" }\`: one page (≤4000 tokens) of entities, then relations, in id order, with counts and a \`next_cursor\` (pass it as \`cursor\`, same query, for more). Filters: \`kinds\`, \`ids\`, \`related_to\` (an entity id), \`relation_kinds\`, \`include\` (\`entities\`/\`relations\`), \`fields\`, \`from_ms\`/\`to_ms\` (what plays then).
- \`{ "op": "run-edit-script", "doc_id", "script", "timeout_ms"?, "auto_commit"? }\`: runs the script; answers a \`preview\` (counts, each change with fields \`before\` → \`after\`, \`unreferenced\`: entities your deletes leave unrelated), \`logs\`, a \`plan_id\`; publishes nothing unless \`auto_commit\`.
- \`{ "op": "commit-plan", "doc_id", "plan_id", "apply_remaining"? }\` publishes a plan; others' edits merge. Ends \`committed\` (\`duplicate\`: applied before); \`conflicted\`: writes losing a change committed after your version (same field or text, deleted what you write, changed what you delete, a broken constraint), a reason each; if \`applied: false\`, nothing was published: snapshot, run anew, or commit with \`"apply_remaining": true\`; \`rejected\`; or \`unconfirmed\`. If unconfirmed or unanswered, call commit-plan again with the same plan_id before any other op: it never applies twice (\`not_found\`: never applied; run again passing that \`plan_id\`).
- \`plan-diff\` (\`doc_id\`, \`plan_id\`): what a committed plan changed. \`revert-plan\` (\`doc_id\`, \`plan_id\`, \`auto_commit\`?): a NEW plan undoing it, answered like run-edit-script.

## Rules
- The script is an async function body; only \`entities\`, \`relations\` and \`console\` exist.
- It stops at \`timeout_ms\` (default and most ${input.timeoutMs}) or its memory ceiling, publishing nothing; errors name \`data.line\` and \`data.column\`.
- A write lands whole or throws a \`DocScriptError\` at its call (\`code\`, \`message\`, \`data.issues\`); catch it to try another way. The finished plan is checked whole.
- A read answers at most ${maxReadItems} items, else throws \`read_limit\`: read in pages (\`limit\`, \`after\`). For many entities: pages by kind and \`range\`, each written with one \`updateMany\`, not an \`update\` each.
- By the plan's end a clip needs its \`sequence-marker\` (\`marker\`) and content (\`contain\`: a caption or a medium); a track holds clips with \`contain\`, in order.
- A \`phonetic-script\`'s \`phonemeScript\`: set the raw phoneme text; the host stores it as a file.

## The contract
\`\`\`ts
${scriptContract}\`\`\`
${input.schema === undefined ? "" : `\n## The schema\n${describeSchema(input.schema)}\n`}
## Worked scripts
\`\`\`js
${examples}
\`\`\`

## The document
${change}${pending}
`;
}
