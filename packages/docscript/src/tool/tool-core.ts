/** What the tool's ops share (`ToolCore`): its settings, document client, sandbox pool, schema, plans and per-document state. */
import { type Logger, silentLogger } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, type DocumentClient } from "../client/create-document-client.ts";
import { isReadyForImports, readyForImports } from "../document/ready-for-imports.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import { type Budgets, defaultBudgets } from "./budget.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import { createPlanCache } from "./plan-cache.ts";
import { discardUploads, type SchemaReference } from "./run-edit-script.ts";
import { fitFailure } from "./tool-answers.ts";
import type { DocumentState, ToolCore } from "./tool-ops.ts";
import type { DocScriptResult, DocScriptToolOptions, ToolFailure } from "./tool-types.ts";

/** Source runs as .ts, a build as .js: worker-loaded modules are named with this file's own extension. */
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const timelineReference: SchemaReference = {
  module: new URL(`../timeline/timeline-schema${extension}`, import.meta.url),
  exportName: "timelineSchema",
};

/** The tool's core, with what only the tool itself needs: its limit, its documents, and closing the pool. */
export interface ToolCoreOwned extends ToolCore {
  readonly timeoutMs: number;
  readonly documents: Map<string, DocumentState>;
  closePool(): Promise<void>;
}

/** The host's hooks the options name. */
function hooksOf(options: DocScriptToolOptions): DocScriptHooks {
  return {
    ...(options.loadEntityAsset === undefined ? {} : { loadEntityAsset: options.loadEntityAsset }),
    ...(options.uploadText === undefined ? {} : { uploadText: options.uploadText }),
    ...(options.loadGenerationFacts === undefined
      ? {}
      : { loadGenerationFacts: options.loadGenerationFacts }),
    ...(options.discardUpload === undefined ? {} : { discardUpload: options.discardUpload }),
  };
}

/**
 * A replica just read whole is made ready for imports once the call is answered, so the pull after a
 * commit does not pay that in its import (ADR 0504).
 */
function readyLater(state: DocumentState, replica: LoroDoc): void {
  if (isReadyForImports(replica)) return;
  setImmediate(() => {
    if (state.replica === replica) readyForImports(replica);
  });
}

/** The document client the options name: their origin, token, user, fetch and request limit. */
function documentClientOf(options: DocScriptToolOptions): DocumentClient {
  const authToken = options.authToken;
  return createDocumentClient({
    origin: options.httpOrigin,
    ...(authToken === undefined
      ? {}
      : { token: typeof authToken === "function" ? () => authToken() : authToken }),
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.fetchImpl === undefined ? {} : { fetchImpl: options.fetchImpl }),
    ...(options.requestTimeoutMs === undefined ? {} : { timeoutMs: options.requestTimeoutMs }),
  });
}

/** The sandbox pool, made on first use, and its closing (nothing to close when none was made). */
function lazySandbox(
  options: DocScriptToolOptions,
  timeoutMs: number,
  logger: Logger,
): { sandbox(): SandboxPool; closePool(): Promise<void> } {
  let pool: SandboxPool | undefined;
  const sandbox = (): SandboxPool => {
    pool ??= createEditScriptPool({
      size: options.sandbox?.workers ?? 1,
      timeoutMs,
      memoryLimitMb: options.sandbox?.memoryLimitMb ?? 256,
      ...(options.sandbox?.runRetainedMb === undefined
        ? {}
        : { runRetainedMb: options.sandbox.runRetainedMb }),
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
  return {
    sandbox,
    async closePool() {
      await pool?.close();
    },
  };
}

/** The schema the reference names, imported once on first use. */
function lazySchema(schemaReference: SchemaReference): () => Promise<Schema> {
  let schemaLoading: Promise<Schema> | undefined;
  return (): Promise<Schema> => {
    schemaLoading ??= import(String(schemaReference.module)).then(
      (loaded: Record<string, unknown>) => loaded[schemaReference.exportName] as Schema,
    );
    return schemaLoading;
  };
}

/** A failure as the model reads it: an error with a string `code` keeps its code, message and data. */
function failureOf(error: unknown): ToolFailure {
  return typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? {
        code: (error as { code: string }).code,
        message: String((error as { message?: unknown }).message),
        ...((error as { data?: unknown }).data === undefined
          ? {}
          : { data: (error as { data?: unknown }).data }),
      }
    : { code: "tool_failed", message: error instanceof Error ? error.message : String(error) };
}

export function createToolCore(
  options: DocScriptToolOptions,
  /** Runs work on a document after the call being answered, before any later call on it. */
  later: ToolCore["later"],
): ToolCoreOwned {
  const logger: Logger = options.logger ?? silentLogger;
  const timeoutMs = options.sandbox?.timeoutMs ?? 30_000;
  const budgets: Budgets = { ...defaultBudgets, ...options.budgets };
  const schemaReference = options.schema ?? timelineReference;
  const hooks = hooksOf(options);
  const client = documentClientOf(options);
  const { sandbox, closePool } = lazySandbox(options, timeoutMs, logger);
  const schema = lazySchema(schemaReference);
  // A plan dropped before it committed takes its staged uploads with it.
  const plans = createPlanCache<{ plan: EditPlan; outcome?: CommitOutcome }>(
    options.maxPlans ?? 16,
    (_planId, entry) => {
      if (entry.outcome?.status !== "committed" && entry.outcome?.status !== "conflicted")
        void discardUploads(hooks, entry.plan.docId, entry.plan.uploads);
    },
  );
  const documents = new Map<string, DocumentState>();

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
    const replica = state.replica;
    // The client sends a request again itself when its kept-alive connection was closed under it.
    const { version } = await client.pullInto(docId, replica);
    state.version = version;
    readyLater(state, replica);
    return state;
  };

  const failure = (op: string, error: unknown, logs?: readonly SandboxLog[]): DocScriptResult =>
    fitFailure({ ok: false, op, error: failureOf(error), ...(logs === undefined ? {} : { logs }) }, budgets);

  const blocked = (op: string, state: DocumentState): DocScriptResult =>
    failure(op, {
      code: "unconfirmed_commit_pending",
      message: `a commit of plan ${state.blockingPlanId} on this document is unconfirmed; retry commit-plan with that plan_id first`,
      data: { plan_id: state.blockingPlanId },
    });

  return {
    options,
    client,
    budgets,
    hooks,
    logger,
    plans,
    schemaReference,
    schema,
    sandbox,
    stateOf,
    pull,
    failure,
    blocked,
    later,
    timeoutMs,
    documents,
    closePool,
  };
}
