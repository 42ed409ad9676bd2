/**
 * The tool's defaults, each shown at its edge: 16 plans kept (the 17th run drops the oldest, never an
 * unconfirmed one), 128 model contexts (the 129th drops the oldest), and snapshot pages of at most
 * 4000 tokens that, followed by their cursors, list every entity and relation once.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { defaultBudgets, tokensOf } from "../src/tool/budget.ts";
import type { DocScriptResult, DocScriptTool } from "../src/tool/create-doc-script-tool.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;

/** Appends "!" to the sample's caption: any number of these plans merge. */
const exclaim = `const [caption] = entities.list({ entityKind: 'caption' });
entities.update(caption.entityId, [{ op: 'splice', path: ['text'], index: caption.payload.text.length, insert: '!' }]);`;

async function runPlans(tool: DocScriptTool, docId: string, count: number): Promise<string[]> {
  const planIds: string[] = [];
  for (let index = 0; index < count; index++) {
    const run = await tool.handle({ op: "run-edit-script", doc_id: docId, script: exclaim });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
    planIds.push(run.plan_id);
  }
  return planIds;
}

/** How a commit of `planId` ends: its status, or the error code when the tool no longer has the plan. */
function commitEnd(result: DocScriptResult): string {
  if (!result.ok) return result.error.code;
  return result.op === "commit-plan" ? result.status : `unexpected ${result.op}`;
}

describe("the tool's defaults", () => {
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness.close();
  });

  test("16 plans by default: the 17th run drops the oldest plan and keeps the next", async () => {
    await harness.createDocument("plans");
    const tool = harness.tool();
    const planIds = await runPlans(tool, "plans", 17);
    const oldest = await tool.handle({ op: "commit-plan", doc_id: "plans", plan_id: planIds[0] });
    assert.equal(commitEnd(oldest), "not_found", JSON.stringify(oldest));
    const kept = await tool.handle({ op: "commit-plan", doc_id: "plans", plan_id: planIds[1] });
    assert.equal(commitEnd(kept), "committed", JSON.stringify(kept));
  });

  test("an unconfirmed plan stays pinned past 16 later plans, and the oldest unpinned one leaves instead", async () => {
    await harness.createDocument("pinned");
    await harness.createDocument("busy");
    let dropNextPushAnswer = false;
    const tool = harness.tool({
      fetchImpl: async (input, init) => {
        const response = await fetch(input, init);
        if (dropNextPushAnswer && String(input instanceof Request ? input.url : input).endsWith("/push")) {
          dropNextPushAnswer = false;
          throw new TypeError("fetch failed");
        }
        return response;
      },
    });
    const [pinned] = await runPlans(tool, "pinned", 1);
    dropNextPushAnswer = true;
    const unconfirmed = await tool.handle({ op: "commit-plan", doc_id: "pinned", plan_id: pinned });
    assert.equal(commitEnd(unconfirmed), "unconfirmed", JSON.stringify(unconfirmed));
    // The pinned plan and 16 more make 17: one must leave, and it is the oldest unpinned one.
    const planIds = await runPlans(tool, "busy", 16);
    const oldest = await tool.handle({ op: "commit-plan", doc_id: "busy", plan_id: planIds[0] });
    assert.equal(commitEnd(oldest), "not_found", JSON.stringify(oldest));
    const kept = await tool.handle({ op: "commit-plan", doc_id: "busy", plan_id: planIds[1] });
    assert.equal(commitEnd(kept), "committed", JSON.stringify(kept));
    const retry = await tool.handle({ op: "commit-plan", doc_id: "pinned", plan_id: pinned });
    assert.equal(commitEnd(retry), "committed", JSON.stringify(retry));
  });

  test("128 model contexts by default: the 129th forgets the oldest and keeps the next", async () => {
    await harness.createDocument("contexts");
    const tool = harness.tool();
    for (let index = 0; index <= 128; index++) {
      const context = await tool.getModelContext({ doc_id: "contexts", context_id: `conversation-${index}` });
      assert.equal(context.changed, null);
    }
    // conversation-1 is remembered (unchanged); asking for it makes it the most recent and drops nothing.
    const kept = await tool.getModelContext({ doc_id: "contexts", context_id: "conversation-1" });
    assert.equal(kept.changed, false);
    // conversation-0 was dropped by the 129th: it reads as a first call again.
    const forgotten = await tool.getModelContext({ doc_id: "contexts", context_id: "conversation-0" });
    assert.equal(forgotten.changed, null);
  });

  test("snapshot pages fit 4000 tokens and, followed by their cursors, list everything once", async () => {
    await harness.createDocument("relations", 120);
    const tool = harness.tool();
    const whole = await harness.read("relations");
    const entities: string[] = [];
    const relations: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await tool.handle({
        op: "snapshot",
        doc_id: "relations",
        ...(cursor === undefined ? {} : { cursor }),
      });
      assert.ok(page.ok && page.op === "snapshot", JSON.stringify(page));
      assert.ok(tokensOf(page) <= defaultBudgets.snapshot, `page ${pages}: ${tokensOf(page)} tokens`);
      assert.equal(page.total.relations, whole.relations.length);
      entities.push(...page.entities.map((entity) => (entity as { entityId: string }).entityId));
      relations.push(...page.relations.map((relation) => relation.relationId));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== undefined && pages < 50);
    assert.ok(pages > 1, "one page cannot hold this document");
    assert.deepEqual(
      entities,
      whole.entities.map((entity) => entity.entityId),
    );
    assert.deepEqual(relations, whole.relations.map((relation) => relation.relationId).sort());
  });
});
