/** `runEditScript`: one script on one pulled snapshot, in the sandbox; the lower-level piece under the tool. */
import { randomBytes, randomUUID } from "node:crypto";
import { LoroDoc, VersionVector } from "loro-crdt";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxFailure, SandboxLog } from "../sandbox/sandbox-protocol.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { assetEntity, uploadTextOf } from "./asset-hooks.ts";
import { type DocumentBytes, documentVersion, holdsVersion, keptEntitiesFor } from "./document-cache.ts";
import type { EditPlan } from "./edit-plan.ts";
import type { EditScriptInput, EditScriptPlanBody } from "./edit-script-dispatcher.ts";
import type { DocScriptHooks, UploadedText } from "./host-hooks.ts";

/** Where the document's schema lives: workers import it by module and export name. */
export interface SchemaReference {
  readonly module: string | URL;
  readonly exportName: string;
}

export interface RunEditScriptRequest {
  readonly docId: string;
  /**
   * The document as pulled: the replica the host keeps (the worker asks it for the updates since the
   * version it last read, ADR 0450), or snapshot bytes. The replica must not change while the run loads.
   */
  readonly replica?: LoroDoc;
  readonly snapshot?: Uint8Array;
  /** The server's version of what was pulled; the plan's base version. */
  readonly version: string;
  readonly script: string;
  readonly timeoutMs?: number;
  /** The plan's actor (the end user), recorded in the commit message. */
  readonly actor?: string;
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
    }
  | { readonly ok: false; readonly error: SandboxFailure; readonly logs: readonly SandboxLog[] };

export interface RunEditScriptContext {
  readonly pool: SandboxPool;
  readonly schema: SchemaReference;
  readonly hooks: DocScriptHooks;
  /** Documents each worker keeps between runs (ADR 0450); 4 by default, 0 keeps none. */
  readonly cachedDocuments?: number;
  /** Entities each worker keeps over all its documents; by default what a 256 MB heap affords (`keptEntitiesFor`). */
  readonly cachedEntities?: number;
}

/** The document the run works on, and how the host answers the worker's `document` call for it. */
function documentSource(request: RunEditScriptRequest): {
  version: string;
  replica: LoroDoc;
  answer(since: unknown): DocumentBytes;
} {
  const replica =
    request.replica ??
    (() => {
      if (request.snapshot === undefined)
        throw new DocScriptError("invalid_request", "runEditScript needs a replica or a snapshot");
      const doc = new LoroDoc();
      doc.import(request.snapshot);
      return doc;
    })();
  const version = documentVersion(replica);
  return {
    version,
    replica,
    answer(since) {
      if (documentVersion(replica) !== version)
        throw new DocScriptError("document_changed", "the replica changed while the run was loading it");
      if (since instanceof Uint8Array && holdsVersion(replica, since)) {
        try {
          return {
            kind: "updates",
            bytes: replica.export({ mode: "update", from: VersionVector.decode(since) }),
          };
        } catch {
          // A replica read from a shallow snapshot holds no history before it: the snapshot is the answer.
        }
      }
      return { kind: "snapshot", bytes: request.snapshot ?? replica.export({ mode: "snapshot" }) };
    },
  };
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
  const planId = `plan_${randomUUID()}`;
  const source = documentSource(request);
  const input: EditScriptInput = {
    docId: request.docId,
    planId,
    ...(request.actor === undefined ? {} : { actor: request.actor }),
    version: source.version,
    cache: {
      documents: context.cachedDocuments ?? 4,
      entities: context.cachedEntities ?? keptEntitiesFor(256),
    },
    schemaModule: String(context.schema.module),
    schemaExport: context.schema.exportName,
    peerId: freshPeerId(),
    hooks: {
      loadEntityAsset: context.hooks.loadEntityAsset !== undefined,
      uploadText: context.hooks.uploadText !== undefined,
    },
  };
  /** What `uploadText` stored during this run: staged with the plan, discarded if the plan is not. */
  const uploads: UploadedText[] = [];
  const result = await context.pool.run({
    script: request.script,
    input,
    ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
    onHostCall: async (method, payload) => {
      if (method === "document") return source.answer((payload as { since?: unknown }).since);
      if (method === "loadEntityAsset" && context.hooks.loadEntityAsset !== undefined) {
        const entity = assetEntity(source.replica, (payload as { entity?: unknown } | null)?.entity);
        return await context.hooks.loadEntityAsset(request.docId, entity);
      }
      if (method === "uploadText" && context.hooks.uploadText !== undefined) {
        const stored = await context.hooks.uploadText(request.docId, uploadTextOf(payload));
        uploads.push(stored);
        return stored;
      }
      throw Object.assign(new Error(`the host offers no ${method}`), { code: "no_host_hook" });
    },
  });
  if (!result.ok) {
    await discardUploads(context.hooks, request.docId, uploads);
    return { ok: false, error: result.error, logs: result.logs };
  }
  const body = result.value as EditScriptPlanBody;
  return {
    ok: true,
    logs: result.logs,
    documentSource: body.documentSource,
    documentWarnings: body.documentWarnings,
    plan: {
      planId,
      docId: request.docId,
      update: body.update,
      baseVersion: request.version,
      preview: body.preview,
      createdFileKeys: body.createdFileKeys,
      uploads,
    },
  };
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
