/**
 * `createDocScriptTool`: the edit-script tool a host registers once. It gives the model the prompt,
 * pulls before every call, runs scripts in the sandbox pool, keeps plans by `plan_id` and commits them,
 * one call at a time per document; an unconfirmed commit holds its document until it is retried.
 */
import { defineTool, silentLogger } from "@tackle/core";
import { z } from "zod";
import { DocumentClientError } from "../client/document-client-error.ts";
import { sameVersion, versionLabel } from "../document/version.ts";
import { type DocumentAccessContext, documentAccess } from "./document-access.ts";
import { planDiffOp, revertOp } from "./history-ops.ts";
import { createPlanCache } from "./plan-cache.ts";
import { renderPrompt } from "./prompt.ts";
import { createKeyedSerializer } from "./serialize-by-key.ts";
import { createToolCore, type ToolCoreOwned } from "./tool-core.ts";
import { type ToolInput, toolInputSchema } from "./tool-input.ts";
import { commitOp, run, snapshot } from "./tool-ops.ts";
import type { DocScriptOutput, DocScriptResult, DocScriptTool, DocScriptToolOptions } from "./tool-types.ts";
import { DocScriptToolError } from "./tool-types.ts";

export type {
  DocScriptOutput,
  DocScriptResult,
  DocScriptTool,
  DocScriptToolOptions,
  DocScriptToolSettings,
  ModelContext,
  ToolFailure,
} from "./tool-types.ts";
export { DocScriptToolError } from "./tool-types.ts";

/** Replicas kept for documents not in use; older idle ones are dropped (the next call pulls a snapshot). */
const maxIdleReplicas = 64;

export function createDocScriptTool(options: DocScriptToolOptions): DocScriptTool {
  const logger = options.logger ?? silentLogger;
  // Checked first: a tool without a rule for which documents it may open is refused at construction.
  const mayOpen = documentAccess(options, logger);
  const name = options.name ?? "docscript";
  // What a call leaves to do on its document once answered (ADR 0516) queues there like a call, and
  // starts a timer's turn later: the answer is handed on first, not held behind it.
  const core = createToolCore(options, (docId, work) => {
    onDocument(docId, async () => {
      await new Promise((resolve) => setTimeout(resolve, 0));
      // A tool closed meanwhile has no replica to keep.
      if (!closed) await work();
    }).catch((error: unknown) =>
      logger.warn("docscript: work after an answer failed", { docId, error: (error as Error).message }),
    );
  });
  const { stateOf, pull, failure, schema, sandbox, timeoutMs } = core;
  const contexts = createPlanCache<string>(options.maxModelContexts ?? 128);
  const onDocument = documentQueue(core);
  let closed = false;

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
    return await onDocument(input.doc_id, async () => labelled(await answer(core, input)));
  };

  return {
    ...defineDocScriptTool(name, handle),
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
      await core.closePool();
    },
  };
}

/** Runs one call on a document, after the calls before it; a blocked or busy document is never dropped. */
function documentQueue(
  core: ToolCoreOwned,
): <Result>(docId: string, task: () => Promise<Result>) => Promise<Result> {
  const { documents, stateOf } = core;
  const serializer = createKeyedSerializer();
  return async <Result>(docId: string, task: () => Promise<Result>): Promise<Result> => {
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
}

/** Answers one parsed call by its op; a blocked document answers only commit-plan. */
async function answer(core: ToolCoreOwned, input: ToolInput): Promise<DocScriptResult> {
  try {
    const state = core.stateOf(input.doc_id);
    if (state.blockingPlanId !== undefined && input.op !== "commit-plan")
      return core.blocked(input.op, state);
    if (input.op === "snapshot") return await snapshot(core, input);
    if (input.op === "run-edit-script") return await run(core, input);
    if (input.op === "plan-diff") return await planDiffOp(core, input);
    if (input.op === "revert-plan") return await revertOp(core, input);
    return await commitOp(core, input);
  } catch (error) {
    if (!DocumentClientError.isInstance(error))
      core.logger.error("docscript: call failed", { op: input.op, error: (error as Error).message });
    return core.failure(input.op, error);
  }
}

/** The tool as a host registers it: its description, and `handle`'s failures thrown as `DocScriptToolError`. */
function defineDocScriptTool(name: string, handle: DocScriptTool["handle"]) {
  return defineTool({
    name,
    description:
      "Edit a structured document by writing a JavaScript edit script. Ops: snapshot (read a page; filter by kinds, ids, related_to, relation_kinds, fields, from_ms/to_ms; follow next_cursor), run-edit-script (run a script; returns a per-write preview and a plan_id), commit-plan (publish a plan; retry with the same plan_id when unsure it landed), plan-diff (a committed plan's changes), revert-plan (a new plan that undoes a committed one; commit it like any plan). Read the prompt's contract first.",
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
}

/**
 * An answer with its versions named as a model reads them (`versionLabel`): a short vector as it is,
 * a long one by its fingerprint, so no answer grows with the number of plans the document took.
 */
function labelled(result: DocScriptResult): DocScriptResult {
  if (!result.ok) return result;
  const answer = { ...result } as Record<string, unknown>;
  if (typeof answer.version === "string") answer.version = versionLabel(answer.version);
  const commit = answer.commit as { version?: unknown } | undefined;
  if (commit !== undefined && typeof commit.version === "string")
    answer.commit = { ...commit, version: versionLabel(commit.version) };
  return answer as DocScriptResult;
}
