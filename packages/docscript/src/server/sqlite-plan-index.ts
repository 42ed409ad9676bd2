/**
 * The SQLite store's plan index (migration 9): the plan ids applied to a document, each with the
 * version it took the document to, written with the update that applied it.
 */
import type { DatabaseSync } from "node:sqlite";
import { sqliteTransaction } from "@tackle/storage";
import type { DocumentStore } from "./document-store.ts";

export interface SqlitePlanIndex {
  /** Which of `planIds` were applied; undefined when the index does not hold the whole history. */
  appliedPlans(documentId: string, planIds: readonly string[]): Map<string, string> | undefined;
  /** Records plans (a plan recorded before keeps its version), inside the caller's transaction. */
  recordPlans(documentId: string, plans: ReadonlyMap<string, string>): void;
  /** Marks the index as holding the document's whole history, inside the caller's transaction. */
  markIndexed(documentId: string): void;
}

export function sqlitePlanIndex(database: DatabaseSync): SqlitePlanIndex {
  const selectIndexed = database.prepare(
    "SELECT plans_indexed FROM docscript_projection WHERE document_id = ?",
  );
  const selectPlans = database.prepare(
    `SELECT plan_id, version FROM docscript_plans
     WHERE document_id = ?1 AND plan_id IN (SELECT value FROM json_each(?2))`,
  );
  const insertPlan = database.prepare(
    "INSERT INTO docscript_plans (document_id, plan_id, version) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
  );
  // A document without rows kept has no projection row yet: one with rows_seq NULL (rows not kept).
  const setIndexed = database.prepare(
    `INSERT INTO docscript_projection (document_id, plans_indexed) VALUES (?, 1)
     ON CONFLICT (document_id) DO UPDATE SET plans_indexed = 1`,
  );
  return {
    appliedPlans(documentId, planIds) {
      const row = selectIndexed.get(documentId) as { plans_indexed: number } | undefined;
      if (row === undefined || Number(row.plans_indexed) !== 1) return undefined;
      if (planIds.length === 0) return new Map();
      const found = selectPlans.all(documentId, JSON.stringify(planIds)) as {
        plan_id: string;
        version: string;
      }[];
      return new Map(found.map((plan) => [plan.plan_id, plan.version]));
    },
    recordPlans(documentId, plans) {
      for (const [planId, version] of plans) insertPlan.run(documentId, planId, version);
    },
    markIndexed(documentId) {
      setIndexed.run(documentId);
    },
  };
}

/** The store's plan index calls over `index`. */
export function sqlitePlanCalls(
  database: DatabaseSync,
  index: SqlitePlanIndex,
): Pick<DocumentStore, "appliedPlans" | "indexPlans"> {
  return {
    async appliedPlans(documentId, planIds) {
      return index.appliedPlans(documentId, planIds);
    },
    async indexPlans(documentId, plans) {
      sqliteTransaction(database, () => {
        index.recordPlans(documentId, plans);
        index.markIndexed(documentId);
      });
    },
  };
}
