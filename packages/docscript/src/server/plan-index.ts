/**
 * Which plan ids a document's history applied, and the version each took it to (ADR 0486): the
 * store's plan index, written with every append, so a push's duplicate-plan check is one indexed
 * read whatever the history's size. A document stored before the index has its history read once
 * (seconds on a large document) and recorded, and is answered by the store from then on.
 */
import type { DocumentStore } from "./document-store.ts";
import { type OpenDocument, plansOf } from "./open-document.ts";

/** Which of `planIds` the open document's history applied, with the version each took it to. */
export async function plansApplied(
  store: DocumentStore,
  documentId: string,
  open: OpenDocument,
  planIds: readonly string[],
): Promise<Map<string, string>> {
  const found = await store.appliedPlans(documentId, planIds);
  if (found !== undefined) return found;
  // Not indexed: every plan of the history (each at the document's current version), recorded once.
  const plans = plansOf(open);
  await store.indexPlans(documentId, plans);
  const applied = new Map<string, string>();
  for (const planId of planIds) {
    const version = plans.get(planId);
    if (version !== undefined) applied.set(planId, version);
  }
  return applied;
}
