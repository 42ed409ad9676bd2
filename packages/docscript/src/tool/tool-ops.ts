/**
 * The edit-script tool's three ops on one document — `snapshot`, `run-edit-script`, `commit-plan` — each
 * run by `createDocScriptTool` after the calls before it on that document.
 */
import type { Logger } from "@tackle/core";
import { decodeImportBlobMeta, type Frontiers, LoroDoc } from "loro-crdt";
import type { DocumentClient } from "../client/create-document-client.ts";
import { type CheckScope, changeScope, checkDocument } from "../document/check-document.ts";
import { projectDocument, refreshRows } from "../document/interpret.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { changedRows } from "../server/changed-rows.ts";
import { type Budgets, fitPrefix, tokensOf } from "./budget.ts";
import { commitPlan } from "./commit-plan.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import type { PlanCache } from "./plan-cache.ts";
import {
  lookupSnapshotPage,
  narrowHint,
  replicaPageRows,
  serverPageRows,
  Unbounded,
} from "./rows-snapshot-page.ts";
import { discardUploads, runEditScript, type SchemaReference } from "./run-edit-script.ts";
import { sessionHostsOf } from "./session-hosts.ts";
import { CursorError, ProjectionIndex } from "./snapshot-page.ts";
import { fitLogs, fitOutcome, runError } from "./tool-answers.ts";
import type { ToolInput } from "./tool-input.ts";
import type { DocScriptResult, DocScriptToolOptions } from "./tool-types.ts";

export interface DocumentState {
  replica: LoroDoc;
  version: string | undefined;
  /** The plan whose commit is unconfirmed: until it resolves, nothing else runs on the document. */
  blockingPlanId: string | undefined;
  /** Calls queued or running on the document; a replica is only dropped when none are. */
  calls: number;
  /** The replica's projection for snapshot pages, kept in step by the rows each pull touched. */
  view: { index: ProjectionIndex; frontiers: Frontiers; issues: DocumentIssue[] | undefined } | undefined;
}

/** What the ops share: the tool's settings, client, caches and per-document state. */
export interface ToolCore {
  readonly options: DocScriptToolOptions;
  readonly client: DocumentClient;
  readonly budgets: Budgets;
  readonly hooks: DocScriptHooks;
  readonly logger: Logger;
  readonly plans: PlanCache<{ plan: EditPlan; outcome?: CommitOutcome }>;
  readonly schemaReference: SchemaReference;
  schema(): Promise<Schema>;
  sandbox(): SandboxPool;
  stateOf(docId: string): DocumentState;
  /** Every call first pulls what the server has. */
  pull(docId: string): Promise<DocumentState>;
  failure(op: string, error: unknown, logs?: readonly SandboxLog[]): DocScriptResult;
  blocked(op: string, state: DocumentState): DocScriptResult;
  /**
   * Runs `work` on the document once the call being answered has ended and before any later call on
   * it: the tool's own copy taking what a commit published (ADR 0516).
   */
  later(docId: string, work: () => Promise<void>): void;
}

export async function commit(
  core: ToolCore,
  state: DocumentState,
  entry: { plan: EditPlan; outcome?: CommitOutcome },
  applyRemaining = false,
): Promise<CommitOutcome> {
  const { options, client, hooks, logger, plans, schema } = core;
  const outcome = await commitPlan(
    {
      client,
      schema: await schema(),
      hooks,
      ...(options.peerId === undefined ? {} : { peerId: options.peerId }),
      logger,
    },
    entry.plan,
    { applyRemaining },
  );
  if (outcome.status === "unconfirmed") {
    state.blockingPlanId = entry.plan.planId;
    plans.pin(entry.plan.planId);
    return outcome;
  }
  // A conflicted plan nothing of which applied stays committable with apply_remaining.
  const published = !(outcome.status === "conflicted" && !outcome.applied);
  if (published) entry.outcome = outcome;
  if (state.blockingPlanId === entry.plan.planId) state.blockingPlanId = undefined;
  plans.unpin(entry.plan.planId);
  if (outcome.status === "rejected") {
    void discardUploads(hooks, entry.plan.docId, entry.plan.uploads);
    entry.plan = { ...entry.plan, uploads: [] };
    // The next call reads the document afresh.
    forgetReplica(state);
    return outcome;
  }
  // A plan that held no change published nothing: there is nothing for the replica to take.
  if (outcome.status === "committed" && outcome.unchanged === true) return outcome;
  // The answer waits for the server alone: the tool's replica takes what the commit published once
  // the answer is out, before the next call on the document (ADR 0516).
  const plan = entry.plan;
  core.later(plan.docId, () => takeCommitted(core, state, plan, published));
  return outcome;
}

/**
 * After a commit's answer: the replica takes the plan's update when the server published it and the
 * replica holds what it was made on, then pulls what the server added (or, not imported, the update
 * itself); the host workers keeping the document follow (ADRs 0495, 0498, 0510).
 */
async function takeCommitted(
  core: ToolCore,
  state: DocumentState,
  plan: EditPlan,
  published: boolean,
): Promise<void> {
  const imported = published && importPublished(state.replica, plan.update);
  const pulled = await core.pull(plan.docId).then(
    () => true,
    (error: unknown) => {
      core.logger.warn("docscript: pull after commit failed", {
        docId: plan.docId,
        error: (error as Error).message,
      });
      return false;
    },
  );
  const hosts = sessionHostsOf(core.sandbox());
  // A worker the plan would take past its bound is replaced now, not after the next run (ADR 0495).
  if (imported) hosts.replaceOutgrown(state.replica, plan.update.byteLength);
  // The host workers keeping the document take the committed plan now, not in the next run (ADR 0498).
  if (pulled) hosts.catchUp(state.replica);
}

/**
 * Imports a published plan's update into the tool's replica when the replica holds everything the
 * update was made on (else the pull after it brings the update from the server): whether the replica
 * may now hold it. The pull that follows brings only what the server added.
 */
function importPublished(replica: LoroDoc, update: Uint8Array): boolean {
  let meta: ReturnType<typeof decodeImportBlobMeta>;
  try {
    meta = decodeImportBlobMeta(update, false);
  } catch {
    return false;
  }
  if (meta.mode !== "update" && meta.mode !== "outdated-update") return false;
  const held = replica.oplogVersion();
  if (!meta.startFrontiers.every((id) => (held.get(id.peer) ?? 0) > id.counter)) return false;
  try {
    replica.import(update);
  } catch {
    // Whatever a failed import left, the pull after it brings what the server holds.
  }
  return true;
}

/** The next call reads the document afresh (a replica holding what the server did not publish). */
function forgetReplica(state: DocumentState): void {
  state.replica = new LoroDoc();
  state.version = undefined;
  state.view = undefined;
}

/** The replica's projection, read once and then refreshed by the rows each pull touched. */
export async function viewOf(core: ToolCore, state: DocumentState) {
  const { schema } = core;
  const frontiers = state.replica.frontiers();
  if (state.view === undefined) {
    state.view = {
      index: new ProjectionIndex(projectDocument(state.replica, await schema())),
      frontiers,
      issues: undefined,
    };
  } else if (state.replica.cmpFrontiers(state.view.frontiers, frontiers) !== 0) {
    const projection = state.view.index.projection;
    const rows = changedRows(state.replica, state.view.frontiers, frontiers);
    const before = changeScope(projection, rows);
    refreshRows(projection, state.replica, rows);
    state.view.index.changed();
    state.view.frontiers = frontiers;
    if (state.view.issues !== undefined) {
      // Issues change only within the reach of the rows the pull touched: re-check that, keep the rest.
      const after = changeScope(projection, rows);
      const entityIds = new Set([...before.entityIds, ...after.entityIds]);
      const relationIds = new Set([...before.relationIds, ...after.relationIds]);
      const scope: CheckScope = { entityIds, relationIds };
      const outside = state.view.issues.filter(
        (issue) =>
          !(issue.entityId !== undefined && entityIds.has(issue.entityId)) &&
          !(issue.relationId !== undefined && relationIds.has(issue.relationId)),
      );
      state.view.issues = [...outside, ...checkDocument(projection, scope)];
    }
  }
  state.view.issues ??= checkDocument(state.view.index.projection);
  return state.view as { index: ProjectionIndex; issues: DocumentIssue[] };
}

export async function snapshot(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const { options, client, budgets, schema, failure } = core;
  const envelope = { ok: true, op: "snapshot", doc_id: input.doc_id, version: "" } as const;
  const budget = budgets.snapshot - tokensOf(envelope) - 60;
  try {
    // Every page reads the server's stored rows (a window of them, or those its query can match: ADR
    // 0467, 0485): nothing of the document is pulled here.
    const rows = serverPageRows(client, input.doc_id);
    const { version, ...page } = await lookupSnapshotPage(await schema(), rows, input, budget);
    return { ...envelope, version, ...page };
  } catch (error) {
    if (error instanceof CursorError)
      return failure(input.op, { code: "invalid_input", message: error.message });
    if (!(error instanceof Unbounded)) throw error;
    // Past the bounds: a document small enough to read whole answers from the replica, never a large one.
    if (error.entities > (options.sandbox?.readWholeUpTo ?? 20_000))
      return failure(input.op, {
        code: "read_limit",
        message: `${error.message}; a snapshot page of a document this large reads only what its query can match: ${narrowHint}`,
      });
  }
  return await replicaSnapshot(core, input);
}

/** A page of a small document that the server's bounds refused: the same lookups, over the replica. */
export async function replicaSnapshot(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const { budgets, pull, failure, schema } = core;
  const state = await pull(input.doc_id);
  const view = await viewOf(core, state);
  const envelope = {
    ok: true,
    op: "snapshot",
    doc_id: input.doc_id,
    version: state.version ?? "",
  } as const;
  const rows = replicaPageRows(view.index.projection, envelope.version, view.issues);
  try {
    const budget = budgets.snapshot - tokensOf(envelope) - 8;
    const { version: _version, ...page } = await lookupSnapshotPage(await schema(), rows, input, budget);
    return { ...envelope, ...page };
  } catch (error) {
    if (error instanceof CursorError)
      return failure(input.op, { code: "invalid_input", message: error.message });
    throw error;
  }
}

export async function run(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const { options, client, budgets, hooks, logger, plans, sandbox, pull, failure, schemaReference } = core;
  if (input.script === undefined)
    return failure(input.op, { code: "invalid_input", message: "run-edit-script needs script" });
  if (input.plan_id !== undefined) {
    if (plans.get(input.plan_id) !== undefined)
      return failure(input.op, {
        code: "invalid_input",
        message: `plan ${input.plan_id} is kept in this process: commit it with commit-plan instead of running it again`,
      });
    // A plan already applied would answer this run's edit `duplicate` and store nothing of it: refused,
    // so a new edit is never reported committed under an old plan's id.
    const known = await client.planState(input.doc_id, input.plan_id);
    if (known.state === "applied")
      return failure(input.op, {
        code: "invalid_input",
        message: `plan ${input.plan_id} was applied already: run the script without plan_id for a new edit`,
      });
  }
  const state = await pull(input.doc_id);
  const result = await runEditScript(
    {
      pool: sandbox(),
      schema: schemaReference,
      hooks,
      ...(options.sandbox?.cachedDocuments === undefined
        ? {}
        : { cachedDocuments: options.sandbox.cachedDocuments }),
      rows: {
        source: (docId) => (lookups) => client.rows(docId, lookups),
        stage: (docId) => (part) => client.stage(docId, part),
        aboveEntities: options.sandbox?.readWholeUpTo ?? 20_000,
        ...(options.sandbox?.stageForMs === undefined ? {} : { stageForMs: options.sandbox.stageForMs }),
      },
    },
    {
      docId: input.doc_id,
      replica: state.replica,
      version: state.version ?? "",
      script: input.script,
      ...(input.timeout_ms === undefined ? {} : { timeoutMs: input.timeout_ms }),
      ...(options.userId === undefined ? {} : { actor: options.userId }),
      // A plan run again keeps its id: the server stores at most one push of it (ADR 0568).
      ...(input.plan_id === undefined ? {} : { planId: input.plan_id }),
    },
  );
  logger.debug("docscript: run ended", {
    docId: input.doc_id,
    ok: result.ok,
    ...(result.scriptMs === undefined ? {} : { scriptMs: result.scriptMs }),
  });
  if (!result.ok) return failure(input.op, runError(result.error), result.logs);
  const logs = fitLogs(result.logs, budgets.logs);
  for (const warning of result.documentWarnings)
    logger.warn("docscript: the sandbox worker recovered while reading the document", {
      docId: input.doc_id,
      warning,
    });
  const entry: { plan: EditPlan; outcome?: CommitOutcome } = { plan: result.plan };
  plans.set(result.plan.planId, entry);
  const committed = input.auto_commit === true ? await commit(core, state, entry) : undefined;
  const preview = result.plan.preview;
  const answer = fitPrefix(preview.changes, budgets.run, (changes) => ({
    ok: true as const,
    op: "run-edit-script" as const,
    doc_id: input.doc_id,
    plan_id: result.plan.planId,
    version: result.plan.baseVersion,
    preview: { ...preview, changes, omitted: preview.omitted + preview.changes.length - changes.length },
    ...(committed === undefined ? {} : { commit: fitOutcome(committed, budgets.commit / 2) }),
  })).answer;
  return { ...answer, logs: logs.logs, ...(logs.omitted === 0 ? {} : { logs_omitted: logs.omitted }) };
}

export async function commitOp(core: ToolCore, input: ToolInput): Promise<DocScriptResult> {
  const { client, budgets, plans, stateOf, pull, failure, blocked } = core;
  const planId = input.plan_id;
  if (planId === undefined)
    return failure(input.op, { code: "invalid_input", message: "commit-plan needs plan_id" });
  const state = stateOf(input.doc_id);
  if (state.blockingPlanId !== undefined && state.blockingPlanId !== planId) return blocked(input.op, state);
  const entry = plans.get(planId);
  if (entry === undefined) {
    // Not kept here (another process ran it, or this one restarted): the server says whether it landed.
    const known = await client.planState(input.doc_id, planId);
    if (known.state === "applied") {
      return {
        ok: true,
        op: "commit-plan",
        doc_id: input.doc_id,
        plan_id: planId,
        status: "committed",
        version: known.version,
        warnings: [],
        duplicate: true,
      };
    }
    return failure(input.op, {
      code: "not_found",
      message: `plan ${planId} is not kept in this process, and the document server says it was never applied; run the script again with plan_id ${planId} (its push may still land: under the same id only one of the two is stored)`,
      data: { resource: "plan", id: planId },
    });
  }
  if (entry.plan.docId !== input.doc_id) {
    return failure(input.op, {
      code: "invalid_input",
      message: `plan ${planId} belongs to document ${entry.plan.docId}`,
    });
  }
  if (entry.outcome !== undefined)
    return {
      ok: true,
      op: "commit-plan",
      doc_id: input.doc_id,
      plan_id: planId,
      ...fitOutcome(entry.outcome, budgets.commit - 60),
    };
  if (state.blockingPlanId === undefined) await pull(input.doc_id);
  const outcome = await commit(core, state, entry, input.apply_remaining === true);
  return {
    ok: true,
    op: "commit-plan",
    doc_id: input.doc_id,
    plan_id: planId,
    ...fitOutcome(outcome, budgets.commit - 60),
  };
}
