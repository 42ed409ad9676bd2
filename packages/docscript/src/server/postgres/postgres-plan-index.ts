/**
 * The PostgreSQL store's plan index (migration 9): the plan ids applied to a document, each with the
 * version it took the document to, written with the update that applied it.
 */
import { postgresDialect as sql } from "@tackle/storage";
import { postgresTransaction } from "@tackle/storage/postgres";
import type pg from "pg";
import type { DocumentStore } from "../document-store.ts";

/** The store's plan index calls, over its pool. */
export function postgresPlanIndex(pool: pg.Pool): Pick<DocumentStore, "appliedPlans" | "indexPlans"> {
  return {
    appliedPlans: (documentId, planIds) => appliedPlans(pool, documentId, planIds),
    indexPlans: (documentId, plans) =>
      postgresTransaction(pool, (client) => indexPlansIn(client, documentId, plans)),
  };
}

/** Records the plans of a document's whole history and marks the index whole, inside the caller's transaction. */
export async function indexPlansIn(
  client: pg.PoolClient,
  documentId: string,
  plans: ReadonlyMap<string, string>,
): Promise<void> {
  await recordPlans(client, documentId, plans);
  await markPlansIndexed(client, documentId);
}

/** Which of `planIds` were applied; undefined when the index does not hold the whole history. */
async function appliedPlans(
  pool: pg.Pool,
  documentId: string,
  planIds: readonly string[],
): Promise<Map<string, string> | undefined> {
  const indexed = await pool.query<{ plans_indexed: boolean }>(
    "SELECT plans_indexed FROM docscript_projection WHERE document_id = $1",
    [documentId],
  );
  if (indexed.rows[0]?.plans_indexed !== true) return undefined;
  if (planIds.length === 0) return new Map();
  const found = await pool.query<{ plan_id: string; version: string }>(
    `SELECT plan_id, version FROM docscript_plans WHERE document_id = $1 AND ${sql.anyOf("plan_id", 2)}`,
    [documentId, sql.list(planIds)],
  );
  return new Map(found.rows.map((plan) => [plan.plan_id, plan.version]));
}

/** Records plans (a plan recorded before keeps its version), inside the caller's transaction. */
export async function recordPlans(
  client: pg.PoolClient,
  documentId: string,
  plans: ReadonlyMap<string, string>,
): Promise<void> {
  if (plans.size === 0) return;
  await client.query(
    `INSERT INTO docscript_plans (document_id, plan_id, version)
     SELECT $1, plan_id, version FROM unnest($2::text[], $3::text[]) AS plan(plan_id, version)
     ON CONFLICT DO NOTHING`,
    [documentId, [...plans.keys()], [...plans.values()]],
  );
}

/**
 * Marks the index as holding the document's whole history, inside the caller's transaction (a
 * document without rows kept gets its projection row here, rows_seq NULL).
 */
async function markPlansIndexed(client: pg.PoolClient, documentId: string): Promise<void> {
  await client.query(
    `INSERT INTO docscript_projection (document_id, plans_indexed) VALUES ($1, true)
     ON CONFLICT (document_id) DO UPDATE SET plans_indexed = true`,
    [documentId],
  );
}
