/** `runEditScript`: one script on one pulled snapshot, in the sandbox; the lower-level piece under the tool. */
import { randomBytes, randomUUID } from "node:crypto";
import type { SandboxPool } from "../sandbox/create-sandbox-pool.ts";
import type { SandboxFailure, SandboxLog } from "../sandbox/sandbox-protocol.ts";
import type { Entity } from "../schema/types.ts";
import type { EditPlan } from "./edit-plan.ts";
import type { EditScriptInput, EditScriptPlanBody } from "./edit-script-dispatcher.ts";
import type { DocScriptHooks } from "./host-hooks.ts";

/** Where the document's schema lives: workers import it by module and export name. */
export interface SchemaReference {
  readonly module: string | URL;
  readonly exportName: string;
}

export interface RunEditScriptRequest {
  readonly docId: string;
  /** The document as pulled: Loro snapshot bytes and their version. */
  readonly snapshot: Uint8Array;
  readonly version: string;
  readonly script: string;
  readonly timeoutMs?: number;
  /** The plan's actor (the end user), recorded in the commit message. */
  readonly actor?: string;
}

export type RunEditScriptResult =
  | { readonly ok: true; readonly plan: EditPlan; readonly logs: readonly SandboxLog[] }
  | { readonly ok: false; readonly error: SandboxFailure; readonly logs: readonly SandboxLog[] };

export interface RunEditScriptContext {
  readonly pool: SandboxPool;
  readonly schema: SchemaReference;
  readonly hooks: DocScriptHooks;
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
  const input: EditScriptInput = {
    docId: request.docId,
    planId,
    ...(request.actor === undefined ? {} : { actor: request.actor }),
    snapshot: request.snapshot,
    schemaModule: String(context.schema.module),
    schemaExport: context.schema.exportName,
    peerId: freshPeerId(),
    hooks: {
      loadEntityAsset: context.hooks.loadEntityAsset !== undefined,
      uploadText: context.hooks.uploadText !== undefined,
    },
  };
  const result = await context.pool.run({
    script: request.script,
    input,
    ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
    onHostCall: async (method, payload) => {
      if (method === "loadEntityAsset" && context.hooks.loadEntityAsset !== undefined) {
        return await context.hooks.loadEntityAsset(request.docId, (payload as { entity: Entity }).entity);
      }
      if (method === "uploadText" && context.hooks.uploadText !== undefined) {
        return await context.hooks.uploadText(request.docId, (payload as { text: string }).text);
      }
      throw Object.assign(new Error(`the host offers no ${method}`), { code: "no_host_hook" });
    },
  });
  if (!result.ok) return { ok: false, error: result.error, logs: result.logs };
  const body = result.value as EditScriptPlanBody;
  return {
    ok: true,
    logs: result.logs,
    plan: {
      planId,
      docId: request.docId,
      update: body.update,
      baseVersion: request.version,
      preview: body.preview,
      createdFileKeys: body.createdFileKeys,
    },
  };
}
