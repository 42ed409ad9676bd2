/**
 * The edit-script tool's history ops on one document (issue 25, point 7): `plan-diff` reads a committed
 * plan's changes as a diff within the run answer's budget; `revert-plan` makes a new plan that inverts a
 * committed one, kept like a run's plan and published with `commit-plan` (or `auto_commit`), where the
 * server checks it like any plan: made on the version the reverted plan left, it is `conflicted` when
 * anyone changed what it puts back since.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { encodeVersion } from "../document/version.ts";
import { fitPrefix } from "./budget.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import { planDiff, revertPlan } from "./plan-history.ts";
import type { PlanPreview } from "./plan-preview.ts";
import { fitOutcome } from "./tool-answers.ts";
import type { ToolInput } from "./tool-input.ts";
import { commit, type ToolCore } from "./tool-ops.ts";
import type { DocScriptResult } from "./tool-types.ts";

/** A preview cut to `budget` tokens inside the answer `build` makes: the counts stay whole. */
function fitPreview<Answer>(
  preview: PlanPreview,
  budget: number,
  build: (preview: PlanPreview) => Answer,
): Answer {
  return fitPrefix(preview.changes, budget, (changes) =>
    build({ ...preview, changes, omitted: preview.omitted + preview.changes.length - changes.length }),
  ).answer;
}

function needsPlanId(core: ToolCore, input: ToolInput): DocScriptResult | undefined {
  if (input.plan_id !== undefined) return undefined;
  return core.failure(input.op, { code: "invalid_input", message: `${input.op} needs plan_id` });
}

export async function planDiffOp(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const missing = needsPlanId(core, input);
  if (missing !== undefined) return missing;
  const planId = input.plan_id as string;
  const state = await core.pull(input.doc_id);
  const preview = planDiff(state.replica, planId, await core.schema());
  return fitPreview(preview, core.budgets.run, (fitted) => ({
    ok: true as const,
    op: "plan-diff" as const,
    doc_id: input.doc_id,
    plan_id: planId,
    version: state.version ?? "",
    diff: fitted,
  }));
}

/** A fresh Loro peer for the revert: 53 random bits, as a run's. */
function freshPeerId(): string {
  return String(randomBytes(8).readBigUInt64BE() & ((1n << 53n) - 1n));
}

export async function revertOp(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const missing = needsPlanId(core, input);
  if (missing !== undefined) return missing;
  const reverted = input.plan_id as string;
  const state = await core.pull(input.doc_id);
  const planId = `plan_${randomUUID()}`;
  // A plan the history lacks (or holds only in part) throws a DocScriptError: the tool answers it as a failure.
  const made = revertPlan(state.replica, reverted, {
    revertPlanId: planId,
    peerId: freshPeerId(),
    ...(core.options.userId === undefined ? {} : { actor: core.options.userId }),
    schema: await core.schema(),
  });
  const plan: EditPlan = {
    planId,
    docId: input.doc_id,
    update: made.update,
    baseVersion: encodeVersion(state.replica.frontiersToVV(made.baseFrontiers)),
    preview: made.preview,
    createdFileKeys: [],
  };
  const entry: { plan: EditPlan; outcome?: CommitOutcome } = { plan };
  core.plans.set(planId, entry);
  const committed = input.auto_commit === true ? await commit(core, state, entry) : undefined;
  return fitPreview(made.preview, core.budgets.run, (preview) => ({
    ok: true as const,
    op: "revert-plan" as const,
    doc_id: input.doc_id,
    plan_id: planId,
    reverts: reverted,
    version: plan.baseVersion,
    preview,
    ...(committed === undefined ? {} : { commit: fitOutcome(committed, core.budgets.commit / 2) }),
  }));
}
