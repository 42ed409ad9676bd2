/**
 * `commitPlan`: publishes a plan's bytes and says how it ended. A push with no confirmed answer is
 * `unconfirmed`: the caller retries with the same bytes (Loro imports an update once, however often it
 * arrives), never by re-running the script. After a committed plan, `loadGenerationFacts` links the
 * media it created to their sources as a follow-up write; a failure there is a warning, not a failed commit.
 */
import type { Logger } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import type { DocumentClient } from "../client/create-document-client.ts";
import { DocumentClientError } from "../client/document-client-error.ts";
import { openDocument } from "../document/document-session.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { CommitOutcome, EditPlan } from "./edit-plan.ts";
import type { DocScriptHooks } from "./host-hooks.ts";
import { fileOf, storedFileKinds } from "./stored-files.ts";

export interface CommitPlanContext {
  readonly client: DocumentClient;
  readonly schema: Schema;
  readonly hooks: DocScriptHooks;
  /** The Loro peer of the tool's own follow-up writes; random when absent. */
  readonly peerId?: bigint | number | string;
  readonly logger: Logger;
}

/**
 * Failures that leave a plan unconfirmed, to be committed again as it is: the update may or may not have
 * landed, or (`too_many_requests`) the server was too busy to read it; a retry is safe after either.
 */
const unconfirmedCodes = new Set(["network_error", "server_error", "invalid_response", "too_many_requests"]);

export async function commitPlan(
  context: CommitPlanContext,
  plan: EditPlan,
  options: {
    applyRemaining?: boolean;
    /**
     * Called once the push is on its way, before its answer is awaited: work of the caller's that
     * overlaps the server's check of the push (ADR 0500). It must not throw.
     */
    whilePushing?: () => void;
  } = {},
): Promise<CommitOutcome> {
  // A plan that holds no change publishes nothing: no push, and not `duplicate` (never applied before).
  if (plan.preview.unchanged === true)
    return { status: "committed", version: plan.baseVersion, warnings: [], unchanged: true };
  let result: Awaited<ReturnType<DocumentClient["push"]>>;
  try {
    const pushing = context.client.push(
      plan.docId,
      plan.update,
      options.applyRemaining === true ? { applyRemaining: true } : {},
    );
    if (options.whilePushing !== undefined) {
      // Handled at once: the push may fail while the caller's work holds the thread.
      const settled = pushing.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      // A few turns of the event loop for the request to be written out before the thread is held.
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      options.whilePushing();
      const answer = await settled;
      if ("error" in answer) throw answer.error;
      result = answer.value;
    } else result = await pushing;
  } catch (error) {
    if (DocumentClientError.isInstance(error) && !unconfirmedCodes.has(error.code)) {
      return { status: "rejected", reasons: [`${error.code}: ${error.message}`], issues: [] };
    }
    return { status: "unconfirmed", reason: (error as Error).message };
  }
  if (result.status === "rejected")
    return { status: "rejected", reasons: result.reasons, issues: result.issues };
  if (result.status === "conflicted")
    return {
      status: "conflicted",
      version: result.version,
      applied: result.applied,
      reasons: result.reasons,
      issues: result.issues,
      ...(result.refused === undefined ? {} : { refused: result.refused }),
    };
  if (result.duplicate === true)
    return { status: "committed", version: result.version, warnings: [], duplicate: true };
  const warnings: string[] = [];
  let version = result.version;
  if (context.hooks.loadGenerationFacts !== undefined && plan.createdFileKeys.length > 0) {
    try {
      version = (await linkGenerationFacts(context, plan)) ?? version;
    } catch (error) {
      const message = `derived-from links were not written: ${(error as Error).message}`;
      context.logger.warn("docscript: loadGenerationFacts failed", {
        docId: plan.docId,
        planId: plan.planId,
        error: (error as Error).message,
      });
      warnings.push(message);
    }
  }
  return { status: "committed", version, warnings };
}

/** Turns each generation record whose ends are both media in the document into `derived-from(product, source)`. */
async function linkGenerationFacts(context: CommitPlanContext, plan: EditPlan): Promise<string | undefined> {
  const records = await context.hooks.loadGenerationFacts!(plan.docId, plan.createdFileKeys);
  const doc = new LoroDoc();
  await context.client.pullInto(plan.docId, doc);
  const before = doc.oplogVersion();
  if (context.peerId !== undefined) doc.setPeerId(context.peerId as `${number}`);
  const session = openDocument(doc, context.schema, { role: "host" });
  const byKey = new Map<string, string>();
  for (const entity of session.entities.list()) {
    if (!storedFileKinds.has(entity.entityKind) || entity.entityKind === "audio-script") continue;
    const file = fileOf(entity);
    if (file !== undefined) byKey.set(file.key, entity.entityId);
  }
  let linked = 0;
  for (const record of records) {
    const product = byKey.get(record.outputAssetId);
    if (product === undefined) continue;
    for (const sourceKey of record.inputAssetIds) {
      const source = byKey.get(sourceKey);
      if (source === undefined || source === product) continue;
      const exists = session.relations
        .of(product, "derived-from")
        .some((relation) => relation.endpoint0EntityId === product && relation.endpoint1EntityId === source);
      if (exists) continue;
      session.relations.link({
        relationKind: "derived-from",
        endpoint0EntityId: product,
        endpoint1EntityId: source,
      });
      linked++;
    }
  }
  if (linked === 0) return undefined;
  doc.commit({ message: JSON.stringify({ followUpOf: plan.planId }), origin: "docscript-generation-facts" });
  const pushed = await context.client.push(plan.docId, doc.export({ mode: "update", from: before }));
  if (pushed.status === "rejected") throw new Error(`the server refused them: ${pushed.reasons.join("; ")}`);
  return pushed.version;
}
