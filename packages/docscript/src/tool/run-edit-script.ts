/** `runEditScript`: one script on one pulled snapshot, in the sandbox; the lower-level piece under the tool. */
import { randomBytes, randomUUID } from "node:crypto";
import { LoroDoc } from "loro-crdt";
import type { LookUpRows } from "../document/row-source.ts";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import { toFailure } from "../sandbox/run-gate.ts";
import type { SandboxFailure, SandboxLog, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { assetEntity, uploadTextOf } from "./asset-hooks.ts";
import { documentVersion } from "./document-cache.ts";
import type { EditPlan } from "./edit-plan.ts";
import { maxHookCallsPerRun } from "./edit-script-dispatcher.ts";
import type { DocScriptHooks, UploadedText } from "./host-hooks.ts";
import { type EditScriptPlanBody, maxReadItems, type RunSessionInput } from "./run-session.ts";
import type { StagePart } from "./run-staging.ts";
import { type HostedRun, type SessionHosts, sessionHostsOf } from "./session-hosts.ts";

/** Where the document's schema lives: workers import it by module and export name. */
export interface SchemaReference {
  readonly module: string | URL;
  readonly exportName: string;
}

export interface RunEditScriptRequest {
  readonly docId: string;
  /**
   * The document as pulled: the replica the host keeps (the host's run documents catch up with it by
   * the updates since the version they hold, ADR 0464), or snapshot bytes. The replica must not change
   * while the run is going.
   */
  readonly replica?: LoroDoc;
  readonly snapshot?: Uint8Array;
  /** The server's version of what was pulled; the plan's base version. */
  readonly version: string;
  readonly script: string;
  readonly timeoutMs?: number;
  /** The plan's actor (the end user), recorded in the commit message. */
  readonly actor?: string;
  /**
   * The id of a plan this run makes again (one the server said it never applied, ADR 0568): the new
   * plan takes it, so if the first push lands after all, at any server, only one of the two is stored.
   */
  readonly planId?: string;
}

export type RunEditScriptResult =
  | {
      readonly ok: true;
      readonly plan: EditPlan;
      readonly logs: readonly SandboxLog[];
      /** How the worker got the document (ADR 0450): from its cache, by the updates since, or a snapshot. */
      readonly documentSource: EditScriptPlanBody["documentSource"];
      /** Problems the worker recovered from while getting the document (log them). */
      readonly documentWarnings: readonly string[];
      /** From the script's start to the run's end (its finish step included), in ms. */
      readonly scriptMs?: number;
    }
  | {
      readonly ok: false;
      readonly error: SandboxFailure;
      readonly logs: readonly SandboxLog[];
      /** From the script's start to the run's end, when the script had started. */
      readonly scriptMs?: number;
    };

export interface RunEditScriptContext {
  readonly pool: SandboxPool;
  readonly schema: SchemaReference;
  readonly hooks: DocScriptHooks;
  /** Documents the host keeps ready for runs (ADR 0464); 4 by default, 0 keeps none. */
  readonly cachedDocuments?: number;
  /** Entities the host keeps of each of those documents; no bound by default. */
  readonly cachedEntities?: number;
  /**
   * The document server's stored rows (ADR 0466): a document of more than `aboveEntities` entities is
   * never read whole on the host; its runs read the rows they look up from `source`. Without it every
   * document is read whole (projected from the replica) for its first run.
   */
  readonly rows?: {
    readonly source: (docId: string) => LookUpRows;
    readonly aboveEntities: number;
    /** Where a large run hands parts of its update ahead of its push (ADR 0508); none: never staged. */
    readonly stage?: (docId: string) => StagePart;
    /** How long from a run's start it stages (`stageForMs`, 10 s, by default). */
    readonly stageForMs?: number;
  };
}

/**
 * Whether the run reads rows on demand: as the kept document does, else as its size says (the server's
 * counts, asked once per document the host does not keep).
 */
async function rowsOnDemand(
  context: RunEditScriptContext,
  hosts: SessionHosts,
  key: string,
  docId: string,
): Promise<{ source: LookUpRows; wholeUpTo: number; stage?: StagePart } | undefined> {
  if (context.rows === undefined) return undefined;
  const onDemand = {
    source: context.rows.source(docId),
    wholeUpTo: maxReadItems,
    ...(context.rows.stage === undefined ? {} : { stage: context.rows.stage(docId) }),
  };
  const reads = hosts.readsOf(key);
  if (reads !== undefined) return reads === "on-demand" ? onDemand : undefined;
  const { counts } = await onDemand.source([]);
  const entities = Object.values(counts.entities).reduce((sum, count) => sum + count, 0);
  return entities > context.rows.aboveEntities ? onDemand : undefined;
}

/** The replica a run reads: the one given, or one read from the snapshot bytes. */
function replicaOf(request: RunEditScriptRequest): LoroDoc {
  if (request.replica !== undefined) return request.replica;
  if (request.snapshot === undefined)
    throw new DocScriptError("invalid_request", "runEditScript needs a replica or a snapshot");
  const doc = new LoroDoc();
  doc.import(request.snapshot);
  return doc;
}

/** A fresh Loro peer for each run: 53 random bits, so two runs never author on the same peer. */
function freshPeerId(): string {
  const bytes = randomBytes(8);
  return String(bytes.readBigUInt64BE() & ((1n << 53n) - 1n));
}

export async function runEditScript(
  context: RunEditScriptContext,
  request: RunEditScriptRequest,
): Promise<RunEditScriptResult> {
  const planId = request.planId ?? `plan_${randomUUID()}`;
  const replica = replicaOf(request);
  const input: RunSessionInput = {
    docId: request.docId,
    planId,
    ...(request.actor === undefined ? {} : { actor: request.actor }),
    peerId: freshPeerId(),
    hooks: {
      loadEntityAsset: context.hooks.loadEntityAsset !== undefined,
      uploadText: context.hooks.uploadText !== undefined,
    },
    ...(context.rows?.stageForMs === undefined ? {} : { stageForMs: context.rows.stageForMs }),
  };
  const version = documentVersion(replica);
  const hosts = sessionHostsOf(context.pool);
  const module = String(context.schema.module);
  const key = `${module}#${context.schema.exportName}#${request.docId}`;
  const rows = await rowsOnDemand(context, hosts, key, request.docId);
  const hooks = runHooks(context, request.docId, replica);
  let hosted: HostedRun | undefined;
  let result: Awaited<ReturnType<SandboxPool["run"]>>;
  try {
    // The run's host work is done in the document's host worker (ADR 0478), never on this thread.
    hosted = await hosts.open({
      key,
      replica,
      schema: { module, exportName: context.schema.exportName },
      input,
      limits: {
        documents: context.cachedDocuments ?? 4,
        ...(context.cachedEntities === undefined ? {} : { entities: context.cachedEntities }),
      },
      rows,
      hook: hooks.call,
    });
    const session = hosted;
    result = await context.pool.run({
      script: request.script,
      input: null,
      hostChannel: session.channel,
      ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
      onHostCall: async (method, payload) => {
        if (documentVersion(replica) !== version)
          throw new DocScriptError("document_changed", "the replica changed while the run was going");
        const call = payload as { binding?: unknown; method?: unknown; args?: unknown } | null;
        // The worker's gate let through only the surface's methods, each the way it is declared.
        if (method === "script" && call?.binding === "entities" && call.method === "materialize")
          return await session.callAsync(
            "entities",
            "materialize",
            Array.isArray(call.args) ? call.args : [],
          );
        if (method === "finish") return await session.finish(payload as ScriptOutcome);
        throw Object.assign(new Error(`the host offers no ${method}`), { code: "no_host_hook" });
      },
    });
  } catch (error) {
    result = { ok: false, error: toFailure(error, "run_failed"), logs: [] };
  } finally {
    hooks.end();
  }
  // A host worker still working for the run is stopped here; one that ran out of memory says so.
  const hostFailure = hosted?.end();
  if (!result.ok || hostFailure !== undefined) {
    await discardUploads(context.hooks, request.docId, hooks.uploads);
    const error =
      hostFailure?.code === "memory_limit" || (result.ok && hostFailure !== undefined)
        ? hostFailure
        : (result as { error: SandboxFailure }).error;
    return {
      ok: false,
      error,
      logs: result.logs,
      ...(result.scriptMs === undefined ? {} : { scriptMs: result.scriptMs }),
    };
  }
  const body = result.value as EditScriptPlanBody;
  return {
    ok: true,
    logs: result.logs,
    documentSource: body.documentSource,
    documentWarnings: body.documentWarnings,
    scriptMs: result.scriptMs,
    plan: {
      planId,
      docId: request.docId,
      update: body.update,
      baseVersion: request.version,
      preview: body.preview,
      createdFileKeys: body.createdFileKeys,
      uploads: hooks.uploads,
    },
  };
}

/**
 * A run's hooks (`loadEntityAsset`, `uploadText`), called on the tool's thread for its host worker:
 * capped per run and per host, never called once the run has ended, and what `uploadText` stored is
 * staged with the plan (discarded if the plan is not).
 */
function runHooks(context: RunEditScriptContext, docId: string, replica: LoroDoc) {
  const uploads: UploadedText[] = [];
  /** Set once the run has ended (done, failed, timed out): no hook is called for it after that. */
  let over = false;
  const hookCalls = hookCallsOf(context.pool);
  let runHookCalls = 0;
  const call = async (method: string, payload: unknown): Promise<unknown> => {
    if (over) throw new DocScriptError("run_ended", "the run has ended; its hooks are not called");
    // Caps on hook calls in flight, per run and per host: past them a call is refused at once, never queued.
    if (runHookCalls >= maxHookCallsPerRun)
      throw new DocScriptError(
        "too_many_hook_calls",
        `at most ${maxHookCallsPerRun} file reads or uploads of one run are in flight at once: await some first`,
      );
    if (hookCalls.inFlight >= maxHookCallsPerHost)
      throw new DocScriptError(
        "hooks_busy",
        "the host's file store is busy with other runs: try again shortly",
      );
    runHookCalls++;
    hookCalls.inFlight++;
    try {
      if (method === "loadEntityAsset" && context.hooks.loadEntityAsset !== undefined) {
        const entity = assetEntity(replica, (payload as { entity?: unknown } | null)?.entity);
        return await context.hooks.loadEntityAsset(docId, entity);
      }
      if (method === "uploadText" && context.hooks.uploadText !== undefined) {
        const stored = await context.hooks.uploadText(docId, uploadTextOf(payload));
        if (over) {
          // The run ended while this upload was stored: nothing will publish it.
          await discardUploads(context.hooks, docId, [stored]);
          throw new DocScriptError("run_ended", "the run has ended; its upload was discarded");
        }
        uploads.push(stored);
        return stored;
      }
    } finally {
      runHookCalls--;
      hookCalls.inFlight--;
    }
    throw Object.assign(new Error(`the host offers no ${method}`), { code: "no_host_hook" });
  };
  return {
    call,
    uploads,
    end() {
      over = true;
    },
  };
}

export { maxHookCallsPerRun };
/** File reads and uploads all runs of one pool (one tool) may have in flight at once. */
export const maxHookCallsPerHost = 32;

const hookCallsByPool = new WeakMap<SandboxPool, { inFlight: number }>();

function hookCallsOf(pool: SandboxPool): { inFlight: number } {
  let counter = hookCallsByPool.get(pool);
  if (counter === undefined) {
    counter = { inFlight: 0 };
    hookCallsByPool.set(pool, counter);
  }
  return counter;
}

/** Hands what a plan staged to the host's `discardUpload`; a failure there is the host's to log, not the run's. */
export async function discardUploads(
  hooks: DocScriptHooks,
  docId: string,
  uploads: readonly UploadedText[] | undefined,
): Promise<void> {
  if (hooks.discardUpload === undefined || uploads === undefined) return;
  for (const upload of uploads) {
    try {
      await hooks.discardUpload(docId, upload);
    } catch {
      // The text stays in the host's store; the host's own collection is its fallback.
    }
  }
}
