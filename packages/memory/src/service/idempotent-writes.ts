/**
 * Exactly-once writes by idempotency key: per tenant, the first request under a key runs and its answer
 * is kept (24 h by default); a repeat of that request answers the kept answer, another request under
 * the key is refused, and a repeat that arrives while the first still runs waits for its answer.
 */
import { createHash } from "node:crypto";
import type { Logger } from "@tackle/core";
import { MemoryError } from "../errors/memory-error.ts";
import type { MemoryStore } from "../store/memory-store.ts";

export interface IdempotencyOptions {
  /** How long a key and its answer are kept (default 24 h); expired keys are swept. */
  readonly ttlMs?: number;
  /** How long a repeat waits for the first request under its key to answer (default 5 s), then `idempotency_key_in_use`. */
  readonly waitMs?: number;
}

export interface IdempotentWrite {
  /** The caller's key: 1 to 200 visible ASCII characters. */
  readonly key: string;
  /** What the key stands for (operation, path parameters, query and body): another request under the key is refused. */
  readonly request: unknown;
}

export type RunOnce = <T>(
  tenantId: string,
  write: IdempotentWrite,
  run: () => Promise<T>,
) => Promise<{ answer: T; replayed: boolean }>;

const keyPattern = /^[\x21-\x7e]{1,200}$/;
const pollMs = 25;
const sweepEveryMs = 60_000;

export function createRunOnce(
  store: MemoryStore,
  options: IdempotencyOptions & { readonly clock: () => Date; readonly logger: Logger },
): RunOnce {
  const ttlMs = options.ttlMs ?? 24 * 60 * 60 * 1000;
  const waitMs = options.waitMs ?? 5000;
  let lastSweep = Number.NEGATIVE_INFINITY;

  function sweep(now: Date) {
    if (now.getTime() - lastSweep < sweepEveryMs) return;
    lastSweep = now.getTime();
    store.sweepIdempotencyKeys(now.toISOString()).catch((error: unknown) => {
      options.logger.warn("memory: sweeping expired idempotency keys failed", {
        error: (error as Error)?.message,
      });
    });
  }

  return async function runOnce<T>(tenantId: string, write: IdempotentWrite, run: () => Promise<T>) {
    if (!keyPattern.test(write.key)) {
      throw new MemoryError(
        "invalid_input",
        "Idempotency-Key must be 1 to 200 visible ASCII characters",
        400,
        { data: { issues: [{ path: ["Idempotency-Key"], message: "1 to 200 visible ASCII characters" }] } },
      );
    }
    const fingerprint = createHash("sha256").update(JSON.stringify(write.request)).digest("hex");
    const deadline = Date.now() + waitMs;
    for (;;) {
      const now = options.clock();
      sweep(now);
      const claim = await store.claimIdempotencyKey({
        tenantId,
        key: write.key,
        fingerprint,
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
      });
      if (claim.claimed) {
        let answer: T;
        try {
          answer = await run();
        } catch (error) {
          // Nothing was answered: free the key so the caller's retry runs the write again.
          await store.releaseIdempotencyKey(tenantId, write.key).catch((releaseError: unknown) => {
            options.logger.warn("memory: freeing an idempotency key after a failed write failed", {
              error: (releaseError as Error)?.message,
            });
          });
          throw error;
        }
        await store.completeIdempotencyKey(tenantId, write.key, JSON.stringify(answer));
        return { answer, replayed: false };
      }
      const { record } = claim;
      if (record.fingerprint !== fingerprint) {
        throw new MemoryError(
          "idempotency_key_reused",
          "This Idempotency-Key was used for another request; send a new key for a new write",
          422,
          { data: { key: write.key, firstUsedAt: record.createdAt } },
        );
      }
      if (record.answer !== undefined) return { answer: JSON.parse(record.answer) as T, replayed: true };
      if (Date.now() >= deadline) {
        throw new MemoryError(
          "idempotency_key_in_use",
          "A request with this Idempotency-Key is still running; retry to get its answer",
          409,
          { retryable: true, data: { key: write.key, since: record.createdAt } },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  };
}
