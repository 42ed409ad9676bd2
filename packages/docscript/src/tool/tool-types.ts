/** The edit-script tool's options, outputs and failures, as a host and a model see them. */
import { type Logger, type Tool, ToolError } from "@tackle/core";
import type { SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Budgets } from "./budget.ts";
import type { DocumentAccess, DocumentAccessContext } from "./document-access.ts";
import type { CommitOutcome } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import type { PlanPreview } from "./plan-preview.ts";
import type { SchemaReference } from "./run-edit-script.ts";
import type { SnapshotPage } from "./snapshot-page.ts";
import type { ToolInput } from "./tool-input.ts";

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
    /**
     * The bytes (MiB) one run's host work may retain — its run document's growth, its plan, its
     * uploads — before it fails `memory_limit` (ADR 0490); 256 by default.
     */
    readonly runRetainedMb?: number;
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
    /**
     * How long from its start a run of thousands of writes hands them to the document server in parts
     * ahead of its push (ADR 0508); past it the rest goes with the push. 10000 by default.
     */
    readonly stageForMs?: number;
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
    } & CommitOutcome)
  | {
      /** A committed plan's changes: the version it was made on → the one it left. */
      readonly op: "plan-diff";
      readonly doc_id: string;
      readonly plan_id: string;
      readonly version: string;
      readonly diff: PlanPreview;
    }
  | {
      /** A new plan (`plan_id`) that inverts the committed plan `reverts`, made on the version it left. */
      readonly op: "revert-plan";
      readonly doc_id: string;
      readonly plan_id: string;
      readonly reverts: string;
      readonly version: string;
      readonly preview: PlanPreview;
      readonly commit?: CommitOutcome;
    };

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
  /** The prompt for a document; a document the call may not open throws `not_found` (resource `document`). */
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

/**
 * A failed call: `code` is the failure's, `data` holds `op`, the failure's own data (`detail`) and the
 * run's logs; a `not_found` also carries its `resource` and `id` at the top (ADR 0027), so
 * `isNotFound(error, "plan")` reads it as it reads any other package's.
 */
export class DocScriptToolError extends ToolError {
  static override readonly brand: symbol = Symbol.for("tackle.docscript-tool-error");

  constructor(failure: Extract<DocScriptResult, { ok: false }>) {
    const detail = failure.error.data as { resource?: unknown; id?: unknown } | undefined;
    const found =
      failure.error.code === "not_found" &&
      typeof detail?.resource === "string" &&
      typeof detail.id === "string"
        ? { resource: detail.resource, id: detail.id }
        : {};
    super(failure.error.code, failure.error.message, {
      data: {
        op: failure.op,
        ...found,
        ...(failure.error.data === undefined ? {} : { detail: failure.error.data }),
        ...(failure.logs === undefined ? {} : { logs: failure.logs }),
        ...(failure.logs_omitted === undefined ? {} : { logs_omitted: failure.logs_omitted }),
      },
    });
    this.name = "DocScriptToolError";
  }
}
