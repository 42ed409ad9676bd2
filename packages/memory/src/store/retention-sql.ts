/** What both stores' retention statements share (ADR 0537). */

/**
 * A finished job that may be deleted, over `memory_jobs AS j`: any but an import job that an event
 * names, which is the provenance of that event and its memories (`chainTrace` reads it).
 */
export const deletableJob = `j.status IN ('succeeded', 'failed') AND (j.type <> 'import' OR NOT EXISTS (
  SELECT 1 FROM memory_events AS e WHERE e.tenant_id = j.tenant_id AND e.import_job_id = j.id))`;
