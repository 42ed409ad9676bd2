/** The memory service's operations; the HTTP API and `MemoryClient` expose exactly these. */
import type { MemoryServiceOperations } from "../operations/memory-operations.ts";
import type { RunOnce } from "./idempotent-writes.ts";

/**
 * Every operation of `MemoryOperations`, the tenant first (from the API key), then the request. An
 * operation by id takes an identity's scope last: a record outside it answers `not_found` exactly like
 * a missing one, so a caller acting for one identity cannot reach another's.
 */
export interface MemoryService extends MemoryServiceOperations {
  /**
   * Runs a write once per tenant and idempotency key: a repeat of the same request answers the first
   * answer (`replayed: true`), another request under the key is refused (`idempotency_key_reused`),
   * and a repeat that arrives while the first runs waits for its answer (ADR 0356).
   */
  writeOnce: RunOnce;
  /** Waits for running jobs to finish, then closes the store. */
  close(): Promise<void>;
}
