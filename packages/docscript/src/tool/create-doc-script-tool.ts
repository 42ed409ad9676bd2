/**
 * `createDocScriptTool`: the edit-script tool a host registers once. It gives the model the prompt,
 * pulls before every call, runs scripts in the sandbox pool, keeps plans by `plan_id` and commits them,
 * one call at a time per document; an unconfirmed commit holds its document until it is retried.
 */
import { type Logger, silentLogger } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { z } from "zod";
import { createDocumentClient, type DocumentClient } from "../client/create-document-client.ts";
import { DocumentClientError } from "../client/document-client-error.ts";
import { interpretDocument } from "../document/interpret.ts";
import { sameVersion } from "../document/version.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxFailure, SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import { commitPlan } from "./commit-plan.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { keptEntitiesFor } from "./document-cache.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import { createPlanCache } from "./plan-cache.ts";
import type { PlanPreview } from "./plan-preview.ts";
import { renderPrompt } from "./prompt.ts";
import { runEditScript, type SchemaReference } from "./run-edit-script.ts";
import { createKeyedSerializer } from "./serialize-by-key.ts";
import { type ToolInput, toolInputSchema } from "./tool-input.ts";

export interface DocScriptToolOptions extends DocScriptHooks {
  /** The document server's origin, or one per document (it must not change for a document). */
  readonly httpOrigin: string | ((docId: string) => string);
  /** Bearer token sent with every request. */
  readonly authToken?: string | (() => string | Promise<string>);
  /** The end user, sent with every request; also the plan's actor. */
  readonly userId?: string;
  /** Loro peer for the tool's own follow-up writes. Each run authors its plan on a fresh peer. */
  readonly peerId?: bigint | number | string;
  /** Defaults for each run: `timeoutMs` 30000, `memoryLimitMb` 256; `workers` warm workers (1). */
  readonly sandbox?: {
    readonly timeoutMs?: number;
    readonly memoryLimitMb?: number;
    readonly workers?: number;
    readonly maxRunsPerWorker?: number;
    /**
     * Documents each warm worker keeps read between runs (ADR 0450), so a run at the same version, or
     * one needing only the updates since, skips reading the whole document; 4 by default, 0 keeps none.
     * Together they keep at most the entities a quarter of `memoryLimitMb` affords (~40k at 256 MB).
     */
    readonly cachedDocuments?: number;
  };
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

export type DocScriptResult =
  | {
      readonly ok: true;
      readonly op: "snapshot";
      readonly doc_id: string;
      readonly version: string;
      readonly entities: readonly unknown[];
      readonly relations: readonly unknown[];
      readonly total: { readonly entities: number; readonly relations: number };
      readonly truncated: boolean;
      /** Present when the document does not project cleanly (for example after a conflicted commit). */
      readonly issues?: readonly unknown[];
    }
  | {
      readonly ok: true;
      readonly op: "run-edit-script";
      readonly doc_id: string;
      readonly plan_id: string;
      readonly version: string;
      readonly preview: PlanPreview;
      readonly logs: readonly SandboxLog[];
      readonly commit?: CommitOutcome;
    }
  | ({
      readonly ok: true;
      readonly op: "commit-plan";
      readonly doc_id: string;
      readonly plan_id: string;
    } & CommitOutcome)
  | {
      readonly ok: false;
      readonly op: string;
      readonly error: ToolFailure;
      readonly logs?: readonly SandboxLog[];
    };

export interface ModelContext {
  readonly prompt: string;
  readonly version: string;
  readonly changed: boolean | null;
}

export interface DocScriptTool {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the tool's input. */
  readonly parameters: Record<string, unknown>;
  /** The zod schema behind `parameters`, for hosts that define tools from Standard Schema. */
  readonly inputSchema: typeof toolInputSchema;
  getModelContext(input: { doc_id: string; context_id: string }): Promise<ModelContext>;
  /** One tool call, passed through unchanged; the result goes back to the model. Never throws for the model's mistakes. */
  handle(input: unknown): Promise<DocScriptResult>;
  close(): Promise<void>;
}

export const snapshotLimit = 200;

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
}

/** Replicas kept for documents not in use; older idle ones are dropped (the next call pulls a snapshot). */
const maxIdleReplicas = 64;

export function createDocScriptTool(options: DocScriptToolOptions): DocScriptTool {
  const logger = options.logger ?? silentLogger;
  const name = options.name ?? "docscript";
  const timeoutMs = options.sandbox?.timeoutMs ?? 30_000;
  const schemaReference = options.schema ?? timelineReference;
  const hooks: DocScriptHooks = {
    ...(options.loadEntityAsset === undefined ? {} : { loadEntityAsset: options.loadEntityAsset }),
    ...(options.uploadText === undefined ? {} : { uploadText: options.uploadText }),
    ...(options.loadGenerationFacts === undefined
      ? {}
      : { loadGenerationFacts: options.loadGenerationFacts }),
  };
  const authToken = options.authToken;
  const client: DocumentClient = createDocumentClient({
    origin: options.httpOrigin,
    ...(authToken === undefined
      ? {}
      : { token: typeof authToken === "function" ? () => authToken() : authToken }),
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.fetchImpl === undefined ? {} : { fetchImpl: options.fetchImpl }),
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
  const plans = createPlanCache<{ plan: EditPlan; outcome?: CommitOutcome }>(options.maxPlans ?? 16);
  const contexts = createPlanCache<string>(options.maxModelContexts ?? 128);
  const documents = new Map<string, DocumentState>();
  const serializer = createKeyedSerializer();
  let closed = false;

  const stateOf = (docId: string): DocumentState => {
    let state = documents.get(docId);
    if (state === undefined) {
      state = { replica: new LoroDoc(), version: undefined, blockingPlanId: undefined, calls: 0 };
      documents.set(docId, state);
    }
    return state;
  };

  /** Every call first pulls what the server has. */
  const pull = async (docId: string): Promise<DocumentState> => {
    const state = stateOf(docId);
    let pulled: { version: string };
    try {
      pulled = await client.pullInto(docId, state.replica);
    } catch (error) {
      // A pull changes nothing on the server: one retry covers a kept-alive connection the server just closed.
      if (!DocumentClientError.isInstance(error) || error.code !== "network_error") throw error;
      pulled = await client.pullInto(docId, state.replica);
    }
    const { version } = pulled;
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
    return { ok: false, op, error: payload, ...(logs === undefined ? {} : { logs }) };
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
    );
    if (outcome.status === "unconfirmed") {
      state.blockingPlanId = entry.plan.planId;
      plans.pin(entry.plan.planId);
      return outcome;
    }
    entry.outcome = outcome;
    if (state.blockingPlanId === entry.plan.planId) state.blockingPlanId = undefined;
    plans.unpin(entry.plan.planId);
    if (outcome.status === "rejected") {
      // The next call reads the document afresh.
      state.replica = new LoroDoc();
      state.version = undefined;
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

  const snapshot = async (input: ToolInput): Promise<DocScriptResult> => {
    const state = await pull(input.doc_id);
    const read = interpretDocument(state.replica, await schema());
    return {
      ok: true,
      op: "snapshot",
      doc_id: input.doc_id,
      version: state.version ?? "",
      entities: read.entities.slice(0, snapshotLimit),
      relations: read.relations.slice(0, snapshotLimit),
      total: { entities: read.entities.length, relations: read.relations.length },
      truncated: read.entities.length > snapshotLimit || read.relations.length > snapshotLimit,
      ...(read.issues.length === 0 ? {} : { issues: read.issues.slice(0, 20) }),
    };
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
        cachedEntities: keptEntitiesFor(options.sandbox?.memoryLimitMb ?? 256),
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
    for (const warning of result.documentWarnings)
      logger.warn("docscript: the sandbox worker recovered while reading the document", {
        docId: input.doc_id,
        warning,
      });
    const entry: { plan: EditPlan; outcome?: CommitOutcome } = { plan: result.plan };
    plans.set(result.plan.planId, entry);
    const committed = input.auto_commit === true ? await commit(state, entry) : undefined;
    return {
      ok: true,
      op: "run-edit-script",
      doc_id: input.doc_id,
      plan_id: result.plan.planId,
      version: result.plan.baseVersion,
      preview: result.plan.preview,
      logs: result.logs,
      ...(committed === undefined ? {} : { commit: committed }),
    };
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
      return failure(input.op, {
        code: "plan_not_found",
        message: `no plan ${planId} in this process (plans are kept for the last ${options.maxPlans ?? 16} runs); run the script again`,
      });
    }
    if (entry.plan.docId !== input.doc_id) {
      return failure(input.op, {
        code: "invalid_input",
        message: `plan ${planId} belongs to document ${entry.plan.docId}`,
      });
    }
    if (entry.outcome !== undefined)
      return { ok: true, op: "commit-plan", doc_id: input.doc_id, plan_id: planId, ...entry.outcome };
    if (state.blockingPlanId === undefined) await pull(input.doc_id);
    const outcome = await commit(state, entry);
    return { ok: true, op: "commit-plan", doc_id: input.doc_id, plan_id: planId, ...outcome };
  };

  const handle = async (raw: unknown): Promise<DocScriptResult> => {
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

  return {
    name,
    description:
      "Edit a structured document by writing a JavaScript edit script. Ops: snapshot (read), run-edit-script (run a script; returns a preview and a plan_id), commit-plan (publish a plan). Read the prompt's contract first.",
    parameters: z.toJSONSchema(toolInputSchema) as Record<string, unknown>,
    inputSchema: toolInputSchema,
    async getModelContext({ doc_id, context_id }) {
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
  return {
    code: "runtime",
    message: error.message,
    data: { cause: error.code, ...(error.data === undefined ? {} : { detail: error.data }) },
  };
}
