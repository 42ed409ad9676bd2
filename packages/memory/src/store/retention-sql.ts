/** What both stores' retention statements share (ADRs 0537, 0545). */

/**
 * A finished job that may be deleted, over `memory_jobs AS j`: any but an import job that an event
 * names, which is the provenance of that event and its memories (`chainTrace` reads it).
 */
export const deletableJob = `j.status IN ('succeeded', 'failed') AND (j.type <> 'import' OR NOT EXISTS (
  SELECT 1 FROM memory_events AS e WHERE e.tenant_id = j.tenant_id AND e.import_job_id = j.id))`;

/**
 * Whose rows a cut counts, the user's id bound to the parameter `user` names: the tenant's (no
 * condition), one user's, or those that name no user (`null`). An equality or `IS NULL` each (not `IS NOT
 * DISTINCT FROM`), so the cut walks the `(tenant_id, user_id, seq)` index on both engines.
 */
export function cutRows(userId: string | null | undefined, user: string): string {
  if (userId === undefined) return "";
  return userId === null ? " AND user_id IS NULL" : ` AND user_id = ${user}`;
}
