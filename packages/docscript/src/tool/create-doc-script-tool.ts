/**
 * `createDocScriptTool`: the edit-script tool a host registers once. It gives the model the prompt,
 * pulls before every call, runs scripts in the sandbox pool, keeps plans by `plan_id` and commits them,
 * one call at a time per document; an unconfirmed commit holds its document until it is retried.
 */
import { defineTool, type Logger, silentLogger, type Tool, ToolError } from "@tackle/core";
import { type Frontiers, LoroDoc } from "loro-crdt";
import { z } from "zod";
import { createDocumentClient, type DocumentClient } from "../client/create-document-client.ts";
import { DocumentClientError } from "../client/document-client-error.ts";
import { type CheckScope, changeScope, checkDocument } from "../document/check-document.ts";
import { projectDocument, refreshRows } from "../document/interpret.ts";
import { sameVersion } from "../document/version.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxFailure, SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { changedRows } from "../server/changed-rows.ts";
import { type Budgets, defaultBudgets, fitPrefix, tokensOf } from "./budget.ts";
import { commitPlan } from "./commit-plan.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { type DocumentAccess, type DocumentAccessContext, documentAccess } from "./document-access.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import { createPlanCache } from "./plan-cache.ts";
import { elide, type PlanPreview } from "./plan-preview.ts";
import { renderPrompt } from "./prompt.ts";
import { narrowHint, rowsSnapshotPage, Unbounded } from "./rows-snapshot-page.ts";
import { discardUploads, runEditScript, type SchemaReference } from "./run-edit-script.ts";
import { createKeyedSerializer } from "./serialize-by-key.ts";
import { servedByServer, serverSnapshotPage } from "./server-snapshot-page.ts";
import { CursorError, ProjectionIndex, type SnapshotPage, snapshotPage } from "./snapshot-page.ts";
import { type ToolInput, toolInputSchema } from "./tool-input.ts";

/**
 * The tool's options. Which documents a call may open is required (`documents` or `authorize`,
 * `DocumentAccess`): no configuration opens every document the tool's token opens.
 */
export type DocScriptToolOptions = DocScriptToolSettings & DocumentAccess;

/** Everything of `DocScriptToolOptions` but which documents a call may open. */
export interface DocScriptToolSettings extends DocScriptHooks {
  /** The document server's origin, or one per document (it must not change for a document). */
  readonly httpOrigin: string | ((docId: string) => string);
  /** Bearer token sent with every request. */
  readonly authToken?: string | (() => string | Promise<string>);
  /** The end user, sent with every request; also the plan's actor. */
  readonly userId?: string;
  /**
   * How long one request to the document server may take (30000 by default). A commit past it ends
   * `unconfirmed` (the plan may have landed; committing it again is safe), so a host of very large
   * documents on a busy server may want more.
   */
  readonly requestTimeoutMs?: number;
  /** Loro peer for the tool's own follow-up writes. Each run authors its plan on a fresh peer. */
  readonly peerId?: bigint | number | string;
  /** Defaults for each run: `timeoutMs` 30000, `memoryLimitMb` 256; `workers` warm workers (1). */
  readonly sandbox?: {
    readonly timeoutMs?: number;
    readonly memoryLimitMb?: number;
    readonly workers?: number;
    readonly maxRunsPerWorker?: number;
    /** How long a worker may take to get a run ready before it fails `timeout`; 30000. */
    readonly prepareTimeoutMs?: number;
    /**
     * Documents the tool keeps ready for runs between calls (ADR 0464: a run doc and the projection,
     * in this process; the workers hold no document), so a run at the same version, or one needing only
     * the updates since, skips reading the whole document; 4 by default, 0 keeps none.
     */
    readonly cachedDocuments?: number;
    /**
     * Documents of more than this many entities are never read whole for runs (ADR 0466): a run reads
     * the rows it looks up from the server's stored rows; 20000 by default (0: every document so).
     */
    readonly readWholeUpTo?: number;
  };
  /** Token budgets of the answers (see `defaultBudgets`): snapshot page 4000, run 2000, logs 1000, commit 2000. */
  readonly budgets?: Partial<Budgets>;
  /** Cache bounds: 16 plans, 128 model contexts. */
  readonly maxPlans?: number;
  readonly maxModelContexts?: number;
  readonly fetchImpl?: typeof fetch;
  /** The documents' schema; the reference `timeline` schema by default. */
  readonly schema?: SchemaReference;
  /** The tool's name as the model sees it; `docscript` by default. */
  readonly name?: string;
  readonly logger?: Logger;
}

export type ToolFailure = { readonly code: string; readonly message: string; readonly data?: unknown };

/** A successful call's output, as the model reads it (every answer within its token budget). */
export type DocScriptOutput =
  | ({
      readonly op: "snapshot";
      readonly doc_id: string;
      readonly version: string;
    } & SnapshotPage)
  | {
      readonly op: "run-edit-script";
      readonly doc_id: string;
      readonly plan_id: string;
      readonly version: string;
      readonly preview: PlanPreview;
      readonly logs: readonly SandboxLog[];
      /** Log lines left out past the logs budget (the first ones are kept). */
      readonly logs_omitted?: number;
      readonly commit?: CommitOutcome;
    }
  | ({
      readonly op: "commit-plan";
      readonly doc_id: string;
      readonly plan_id: string;
    } & CommitOutcome);

/** `handle`'s answer: the output, or the failure as data (what `execute` throws as a `ToolError`). */
export type DocScriptResult =
  | ({ readonly ok: true } & DocScriptOutput)
  | {
      readonly ok: false;
      readonly op: string;
      readonly error: ToolFailure;
      readonly logs?: readonly SandboxLog[];
      readonly logs_omitted?: number;
    };

export interface ModelContext {
  readonly prompt: string;
  readonly version: string;
  readonly changed: boolean | null;
}

/**
 * The edit-script tool: a core `Tool` (register it in a tool set, serve it over MCP) whose failures are
 * thrown `ToolError`s, so a tool set answers them `ok: false` and MCP marks them `isError`.
 */
export interface DocScriptTool extends Tool<ToolInput, DocScriptOutput> {
  /** The prompt for a document; a document the call may not open throws `document_not_found`. */
  getModelContext(
    input: { doc_id: string; context_id: string },
    context?: Omit<DocumentAccessContext, "op">,
  ): Promise<ModelContext>;
  /**
   * One call with the failure as data instead of thrown (what `execute` does, for hosts without a tool
   * set); `context` is what `authorize` is told about the caller.
   */
  handle(input: unknown, context?: Omit<DocumentAccessContext, "op">): Promise<DocScriptResult>;
  close(): Promise<void>;
}

/** A failed call: `code` is the failure's, `data` holds `op`, the failure's own data and the run's logs. */
export class DocScriptToolError extends ToolError {
  static override readonly brand: symbol = Symbol.for("tackle.docscript-tool-error");

  constructor(failure: Extract<DocScriptResult, { ok: false }>) {
    super(failure.error.code, failure.error.message, {
      data: {
        op: failure.op,
        ...(failure.error.data === undefined ? {} : { detail: failure.error.data }),
        ...(failure.logs === undefined ? {} : { logs: failure.logs }),
        ...(failure.logs_omitted === undefined ? {} : { logs_omitted: failure.logs_omitted }),
      },
    });
    this.name = "DocScriptToolError";
  }
}

/** Source runs as .ts, a build as .js: worker-loaded modules are named with this file's own extension. */
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const timelineReference: SchemaReference = {
  module: new URL(`../timeline/timeline-schema${extension}`, import.meta.url),
  exportName: "timelineSchema",
};

interface DocumentState {
  replica: LoroDoc;
  version: string | undefined;
  /** The plan whose commit is unconfirmed: until it resolves, nothing else runs on the document. */
  blockingPlanId: string | undefined;
  /** Calls queued or running on the document; a replica is only dropped when none are. */
  calls: number;
  /** The replica's projection for snapshot pages, kept in step by the rows each pull touched. */
  view: { index: ProjectionIndex; frontiers: Frontiers; issues: DocumentIssue[] | undefined } | undefined;
}

/** Replicas kept for documents not in use; older idle ones are dropped (the next call pulls a snapshot). */
const maxIdleReplicas = 64;

export function createDocScriptTool(options: DocScriptToolOptions): DocScriptTool {
  const logger = options.logger ?? silentLogger;
  // Checked first: a tool without a rule for which documents it may open is refused at construction.
  const mayOpen = documentAccess(options, logger);
  const name = options.name ?? "docscript";
  const timeoutMs = options.sandbox?.timeoutMs ?? 30_000;
  const budgets: Budgets = { ...defaultBudgets, ...options.budgets };
  const schemaReference = options.schema ?? timelineReference;
  const hooks: DocScriptHooks = {
    ...(options.loadEntityAsset === undefined ? {} : { loadEntityAsset: options.loadEntityAsset }),
    ...(options.uploadText === undefined ? {} : { uploadText: options.uploadText }),
    ...(options.loadGenerationFacts === undefined
      ? {}
      : { loadGenerationFacts: options.loadGenerationFacts }),
    ...(options.discardUpload === undefined ? {} : { discardUpload: options.discardUpload }),
  };
  const authToken = options.authToken;
  const client: DocumentClient = createDocumentClient({
    origin: options.httpOrigin,
    ...(authToken === undefined
      ? {}
      : { token: typeof authToken === "function" ? () => authToken() : authToken }),
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.fetchImpl === undefined ? {} : { fetchImpl: options.fetchImpl }),
    ...(options.requestTimeoutMs === undefined ? {} : { timeoutMs: options.requestTimeoutMs }),
  });
  let pool: SandboxPool | undefined;
  const sandbox = (): SandboxPool => {
    pool ??= createEditScriptPool({
      size: options.sandbox?.workers ?? 1,
      timeoutMs,
      memoryLimitMb: options.sandbox?.memoryLimitMb ?? 256,
      ...(options.sandbox?.maxRunsPerWorker === undefined
        ? {}
        : { maxRunsPerWorker: options.sandbox.maxRunsPerWorker }),
      ...(options.sandbox?.prepareTimeoutMs === undefined
        ? {}
        : { prepareTimeoutMs: options.sandbox.prepareTimeoutMs }),
      logger,
    });
    return pool;
  };
  let schemaLoading: Promise<Schema> | undefined;
  const schema = (): Promise<Schema> => {
    schemaLoading ??= import(String(schemaReference.module)).then(
      (loaded: Record<string, unknown>) => loaded[schemaReference.exportName] as Schema,
    );
    return schemaLoading;
  };
  // A plan dropped before it committed takes its staged uploads with it.
  const plans = createPlanCache<{ plan: EditPlan; outcome?: CommitOutcome }>(
    options.maxPlans ?? 16,
    (_planId, entry) => {
      if (entry.outcome?.status !== "committed" && entry.outcome?.status !== "conflicted")
        void discardUploads(hooks, entry.plan.docId, entry.plan.uploads);
    },
  );
  const contexts = createPlanCache<string>(options.maxModelContexts ?? 128);
  const documents = new Map<string, DocumentState>();
  const serializer = createKeyedSerializer();
  let closed = false;

  const stateOf = (docId: string): DocumentState => {
    let state = documents.get(docId);
    if (state === undefined) {
      state = {
        replica: new LoroDoc(),
        version: undefined,
        blockingPlanId: undefined,
        calls: 0,
        view: undefined,
      };
      documents.set(docId, state);
    }
    return state;
  };

  /** Every call first pulls what the server has. */
  const pull = async (docId: string): Promise<DocumentState> => {
    const state = stateOf(docId);
    // The client sends a request again itself when its kept-alive connection was closed under it.
    const { version } = await client.pullInto(docId, state.replica);
    state.version = version;
    return state;
  };

  /** Runs one call on a document, after the calls before it; a blocked or busy document is never dropped. */
  const onDocument = async <Result>(docId: string, task: () => Promise<Result>): Promise<Result> => {
    const state = stateOf(docId);
    state.calls++;
    try {
      return await serializer.run(docId, task);
    } finally {
      state.calls--;
      if (documents.size > maxIdleReplicas) {
        for (const [id, candidate] of documents) {
          if (documents.size <= maxIdleReplicas) break;
          if (candidate.calls === 0 && candidate.blockingPlanId === undefined) documents.delete(id);
        }
      }
    }
  };

  const failure = (op: string, error: unknown, logs?: readonly SandboxLog[]): DocScriptResult => {
    const payload: ToolFailure =
      typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
        ? {
            code: (error as { code: string }).code,
            message: String((error as { message?: unknown }).message),
            ...((error as { data?: unknown }).data === undefined
              ? {}
              : { data: (error as { data?: unknown }).data }),
          }
        : { code: "tool_failed", message: error instanceof Error ? error.message : String(error) };
    return fitFailure({ ok: false, op, error: payload, ...(logs === undefined ? {} : { logs }) }, budgets);
  };

  const blocked = (op: string, state: DocumentState): DocScriptResult =>
    failure(op, {
      code: "unconfirmed_commit_pending",
      message: `a commit of plan ${state.blockingPlanId} on this document is unconfirmed; retry commit-plan with that plan_id first`,
      data: { plan_id: state.blockingPlanId },
    });

  const commit = async (
    state: DocumentState,
    entry: { plan: EditPlan; outcome?: CommitOutcome },
    applyRemaining = false,
  ): Promise<CommitOutcome> => {
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
    if (!(outcome.status === "conflicted" && !outcome.applied)) entry.outcome = outcome;
    if (state.blockingPlanId === entry.plan.planId) state.blockingPlanId = undefined;
    plans.unpin(entry.plan.planId);
    if (outcome.status === "rejected") {
      void discardUploads(hooks, entry.plan.docId, entry.plan.uploads);
      entry.plan = { ...entry.plan, uploads: [] };
      // The next call reads the document afresh.
      state.replica = new LoroDoc();
      state.version = undefined;
      state.view = undefined;
    } else {
      await pull(entry.plan.docId).catch((error: unknown) =>
        logger.warn("docscript: pull after commit failed", {
          docId: entry.plan.docId,
          error: (error as Error).message,
        }),
      );
    }
    return outcome;
  };

  /** The replica's projection, read once and then refreshed by the rows each pull touched. */
  const viewOf = async (state: DocumentState) => {
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
  };

  const snapshot = async (input: ToolInput): Promise<DocScriptResult> => {
    const envelope = { ok: true, op: "snapshot", doc_id: input.doc_id, version: "" } as const;
    const budget = budgets.snapshot - tokensOf(envelope) - 60;
    try {
      // Plain, kind and id pages read the server's stored rows; related, timed and kinds-with-relations
      // pages look up the rows their query can match (ADR 0467): nothing of the document is pulled here.
      const { version, ...page } = servedByServer(input)
        ? await serverSnapshotPage(client, input.doc_id, input, budget)
        : await rowsSnapshotPage(await schema(), client, input.doc_id, input, budget);
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
    return await replicaSnapshot(input);
  };

  const replicaSnapshot = async (input: ToolInput): Promise<DocScriptResult> => {
    const state = await pull(input.doc_id);
    const view = await viewOf(state);
    const envelope = {
      ok: true,
      op: "snapshot",
      doc_id: input.doc_id,
      version: state.version ?? "",
    } as const;
    let page: SnapshotPage;
    try {
      page = snapshotPage(view.index, view.issues, input, budgets.snapshot - tokensOf(envelope) - 8);
    } catch (error) {
      if (error instanceof CursorError)
        return failure(input.op, { code: "invalid_input", message: error.message });
      throw error;
    }
    return { ...envelope, ...page };
  };

  const run = async (input: ToolInput): Promise<DocScriptResult> => {
    if (input.script === undefined)
      return failure(input.op, { code: "invalid_input", message: "run-edit-script needs script" });
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
          aboveEntities: options.sandbox?.readWholeUpTo ?? 20_000,
        },
      },
      {
        docId: input.doc_id,
        replica: state.replica,
        version: state.version ?? "",
        script: input.script,
        ...(input.timeout_ms === undefined ? {} : { timeoutMs: input.timeout_ms }),
        ...(options.userId === undefined ? {} : { actor: options.userId }),
      },
    );
    if (!result.ok) return failure(input.op, runError(result.error), result.logs);
    const logs = fitLogs(result.logs, budgets.logs);
    for (const warning of result.documentWarnings)
      logger.warn("docscript: the sandbox worker recovered while reading the document", {
        docId: input.doc_id,
        warning,
      });
    const entry: { plan: EditPlan; outcome?: CommitOutcome } = { plan: result.plan };
    plans.set(result.plan.planId, entry);
    const committed = input.auto_commit === true ? await commit(state, entry) : undefined;
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
  };

  const commitOp = async (input: ToolInput): Promise<DocScriptResult> => {
    const planId = input.plan_id;
    if (planId === undefined)
      return failure(input.op, { code: "invalid_input", message: "commit-plan needs plan_id" });
    const state = stateOf(input.doc_id);
    if (state.blockingPlanId !== undefined && state.blockingPlanId !== planId)
      return blocked(input.op, state);
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
        code: "plan_not_found",
        message: `plan ${planId} is not kept in this process, and the document server confirms it was never applied; run the script again (it cannot apply twice)`,
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
    const outcome = await commit(state, entry, input.apply_remaining === true);
    return {
      ok: true,
      op: "commit-plan",
      doc_id: input.doc_id,
      plan_id: planId,
      ...fitOutcome(outcome, budgets.commit - 60),
    };
  };

  const handle = async (
    raw: unknown,
    caller: Omit<DocumentAccessContext, "op"> = {},
  ): Promise<DocScriptResult> => {
    const parsed = toolInputSchema.safeParse(raw);
    const op = typeof (raw as { op?: unknown })?.op === "string" ? (raw as { op: string }).op : "unknown";
    if (!parsed.success) {
      return failure(op, {
        code: "invalid_input",
        message: z.prettifyError(parsed.error),
        data: { issues: parsed.error.issues },
      });
    }
    if (closed) return failure(op, { code: "closed", message: "the tool is closed" });
    const input = parsed.data;
    // Before any read or any state for the id: a refused id answers as a missing document.
    const refused = await mayOpen(input.doc_id, { ...caller, op: input.op });
    if (refused !== undefined) return failure(input.op, refused);
    return await onDocument(input.doc_id, async () => {
      try {
        const state = stateOf(input.doc_id);
        if (state.blockingPlanId !== undefined && input.op !== "commit-plan") return blocked(input.op, state);
        if (input.op === "snapshot") return await snapshot(input);
        if (input.op === "run-edit-script") return await run(input);
        return await commitOp(input);
      } catch (error) {
        if (!DocumentClientError.isInstance(error))
          logger.error("docscript: call failed", { op: input.op, error: (error as Error).message });
        return failure(input.op, error);
      }
    });
  };

  const tool = defineTool({
    name,
    description:
      "Edit a structured document by writing a JavaScript edit script. Ops: snapshot (read a page; filter by kinds, ids, related_to, relation_kinds, fields, from_ms/to_ms; follow next_cursor), run-edit-script (run a script; returns a per-write preview and a plan_id), commit-plan (publish a plan; retry with the same plan_id when unsure it landed). Read the prompt's contract first.",
    input: toolInputSchema,
    source: "@tackle/docscript",
    execute: async (input: ToolInput, context): Promise<DocScriptOutput> => {
      const result = await handle(input, {
        callId: context.callId,
        ...(context.identity === undefined ? {} : { identity: context.identity }),
      });
      if (!result.ok) throw new DocScriptToolError(result);
      const { ok: _ok, ...output } = result;
      return output as DocScriptOutput;
    },
  });

  return {
    ...tool,
    async getModelContext({ doc_id, context_id }, caller = {}) {
      const refused = await mayOpen(doc_id, { ...caller, op: "context" });
      if (refused !== undefined) throw refused;
      // The host asks for the prompt right before the model call: the moment to warm a worker for the script.
      if (!closed) sandbox();
      return await onDocument(doc_id, async () => {
        const state = stateOf(doc_id);
        if (state.blockingPlanId === undefined) await pull(doc_id);
        const version = state.version ?? "";
        const key = JSON.stringify([context_id, doc_id]);
        const previous = contexts.get(key);
        contexts.set(key, version);
        const changed = previous === undefined ? null : !sameVersion(previous, version);
        return {
          prompt: renderPrompt({
            toolName: name,
            docId: doc_id,
            version,
            changed,
            timeoutMs,
            schema: await schema(),
            ...(state.blockingPlanId === undefined ? {} : { unconfirmedPlanId: state.blockingPlanId }),
          }),
          version,
          changed,
        };
      });
    },
    handle,
    async close() {
      closed = true;
      await pool?.close();
    },
  };
}

/** A run's failure as the model reads it: sandbox limits keep their codes, anything else in the script is `runtime`. */
function runError(error: SandboxFailure): ToolFailure {
  const kept = new Set(["timeout", "memory_limit", "syntax_error", "sandbox_crashed", "sandbox_closed"]);
  if (kept.has(error.code)) return error;
  // Where the script failed stays beside the cause; what the refusal said (its issues) is the detail.
  const { line, column, sourceLine, ...detail } = (
    typeof error.data === "object" && error.data !== null ? error.data : {}
  ) as Record<string, unknown>;
  const position = line === undefined ? {} : { line, column, sourceLine };
  return {
    code: "runtime",
    message: error.message,
    data: {
      cause: error.code,
      ...position,
      ...(Object.keys(detail).length === 0 ? {} : { detail }),
    },
  };
}

/** The longest log line kept whole; longer ones read as their head and a count. */
const maxLogLineLength = 2_000;

/** The first log lines that fit the logs budget (each long line shortened), and how many were left out. */
function fitLogs(logs: readonly SandboxLog[], budget: number): { logs: SandboxLog[]; omitted: number } {
  const shortened = logs.map((line) =>
    line.text.length <= maxLogLineLength
      ? line
      : {
          level: line.level,
          text: `${line.text.slice(0, maxLogLineLength)}… [+${line.text.length - maxLogLineLength} chars]`,
        },
  );
  const { taken } = fitPrefix(shortened, budget, (kept) => kept);
  return { logs: shortened.slice(0, taken), omitted: logs.length - taken };
}

/** A commit outcome within `budget` tokens: its lists (reasons, issues, warnings) cut with counts. */
function fitOutcome(
  outcome: CommitOutcome,
  budget: number,
): CommitOutcome & { omitted?: Record<string, number> } {
  if (tokensOf(outcome) <= budget) return outcome;
  const lists = (["reasons", "issues", "warnings"] as const).filter((key) =>
    Array.isArray((outcome as Record<string, unknown>)[key]),
  );
  let shown = 20;
  for (;;) {
    const omitted: Record<string, number> = {};
    const cut: Record<string, unknown> = { ...outcome };
    for (const key of lists) {
      const list = (outcome as unknown as Record<string, readonly unknown[]>)[key]!;
      if (list.length > shown) omitted[key] = list.length - shown;
      cut[key] = list.slice(0, shown).map((item) => elide(item));
    }
    const answer = { ...cut, ...(Object.keys(omitted).length === 0 ? {} : { omitted }) } as CommitOutcome & {
      omitted?: Record<string, number>;
    };
    if (shown === 0 || tokensOf(answer) <= budget) return answer;
    shown = Math.floor(shown / 2);
  }
}

/** A failure within the commit budget: its message shortened, listed issues cut with a count, logs fitted. */
function fitFailure(
  failure: Extract<DocScriptResult, { ok: false }>,
  budgets: Budgets,
): Extract<DocScriptResult, { ok: false }> {
  const logs = failure.logs === undefined ? undefined : fitLogs(failure.logs, budgets.logs);
  let error = failure.error;
  if (tokensOf(error) > budgets.commit) {
    const data = error.data as Record<string, unknown> | undefined;
    const issues = Array.isArray(data?.issues) ? (data.issues as unknown[]) : undefined;
    let shown = 20;
    for (;;) {
      error = {
        code: error.code,
        message:
          failure.error.message.length <= maxLogLineLength
            ? failure.error.message
            : `${failure.error.message.slice(0, maxLogLineLength)}… [+${failure.error.message.length - maxLogLineLength} chars]`,
        ...(data === undefined
          ? {}
          : {
              data:
                issues === undefined
                  ? elide(data)
                  : {
                      ...(elide({ ...data, issues: undefined }) as Record<string, unknown>),
                      issues: issues.slice(0, shown).map((issue) => elide(issue)),
                      issues_omitted: Math.max(0, issues.length - shown),
                    },
            }),
      };
      if (shown === 0 || tokensOf(error) <= budgets.commit) break;
      shown = Math.floor(shown / 2);
    }
  }
  return {
    ok: false,
    op: failure.op,
    error,
    ...(logs === undefined ? {} : { logs: logs.logs }),
    ...(logs === undefined || logs.omitted === 0 ? {} : { logs_omitted: logs.omitted }),
  };
}
