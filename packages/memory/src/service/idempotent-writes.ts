/**
 * Exactly-once writes by idempotency key: per tenant, the first request under a key runs and its answer
 * is kept (24 h by default); a repeat of that request answers the kept answer, another request under
 * the key is refused, and a request that arrives while one under its key still runs waits for it,
 * then is answered by what the key recorded (ADRs 0356, 0567).
 */
import { createHash } from "node:crypto";
import type { Logger } from "@tackle/core";
import { MemoryError } from "../errors/memory-error.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { MemoryStore } from "../store/memory-store.ts";

export interface IdempotencyOptions {
  /** How long a key and its answer are kept (default 24 h); expired keys are swept. */
  readonly ttlMs?: number;
  /** How long a repeat waits for the first request under its key to answer (default 5 s), then `idempotency_key_in_use`. */
  readonly waitMs?: number;
  /**
   * The largest answer kept whole (default 64 KiB of JSON). A larger one is answered once; its key
   * keeps only its size, and a repeat gets `idempotency_answer_not_kept`.
   */
  readonly maxAnswerBytes?: number;
}

export interface IdempotentWrite {
  /** The caller's key: 1 to 200 visible ASCII characters. */
  readonly key: string;
  /** What the key stands for (operation, path parameters, query and body): another request under the key is refused. */
  readonly request: unknown;
  /** The identity the write is made for; a purge of that scope deletes the kept answer. */
  readonly scope?: MemoryScope;
}

export type RunOnce = <T>(
  tenantId: string,
  write: IdempotentWrite,
  run: () => Promise<T>,
) => Promise<{ answer: T; replayed: boolean }>;

const keyPattern = /^[\x21-\x7e]{1,200}$/;
const pollMs = 25;
const sweepEveryMs = 60_000;
/** What a key keeps in place of an answer over `maxAnswerBytes`. */
const notKeptMarker = "$tackleAnswerNotKept";

/** The key was recorded by another writer first (its transaction committed before this one's). */
class KeyTaken extends Error {}

export function createRunOnce(
  store: MemoryStore,
  options: IdempotencyOptions & { readonly clock: () => Date; readonly logger: Logger },
): RunOnce {
  const ttlMs = options.ttlMs ?? 24 * 60 * 60 * 1000;
  const waitMs = options.waitMs ?? 5000;
  const maxAnswerBytes = options.maxAnswerBytes ?? 64 * 1024;
  // For the process tests only: the write is done but its transaction not committed, and never will be.
  const stallBeforeCommit = process.env.TACKLE_MEMORY_TEST_STALL_BEFORE_COMMIT === "1";
  /** Writes running in this process, by tenant and key: a repeat here waits for them. */
  const running = new Map<string, { done: Promise<unknown>; since: string }>();
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

  async function recordedSince(tenantId: string, key: string): Promise<boolean> {
    const now = options.clock().toISOString();
    return (await store.findIdempotencyKey(tenantId, key, now).catch(() => undefined)) !== undefined;
  }

  return async function runOnce<T>(tenantId: string, write: IdempotentWrite, run: () => Promise<T>) {
    checkIdempotencyKey(write.key);
    const fingerprint = createHash("sha256").update(JSON.stringify(write.request)).digest("hex");
    const flight = `${tenantId}\u0000${write.key}`;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const now = options.clock();
      sweep(now);
      const record = await store.findIdempotencyKey(tenantId, write.key, now.toISOString());
      if (record !== undefined && record.fingerprint !== fingerprint)
        throw reused(write.key, record.createdAt);
      if (record?.answer !== undefined) {
        return {
          answer: replay<T>(
            write.key,
            { answer: record.answer, createdAt: record.createdAt },
            maxAnswerBytes,
          ),
          replayed: true,
        };
      }
      // Running here already, or a claim left by an earlier version of the store: wait for its answer.
      // Whatever the running request: the key is not its own until it commits (it may fail, or lose
      // the key to another process), so another request under the key is judged by what is recorded.
      const first = running.get(flight);
      if (first !== undefined || record !== undefined) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw inUse(write.key, first?.since ?? record?.createdAt ?? now.toISOString());
        await Promise.race([
          first?.done,
          new Promise((resolve) => setTimeout(resolve, first ? remaining : Math.min(pollMs, remaining))),
        ]);
        continue;
      }
      // The write and its key's answer commit together: a process that dies in between stored
      // neither, so a repeat runs the write again. Of two processes racing on one key, the second to
      // record it rolls its write back and answers the first's answer.
      const attempt = store.withTransaction(async () => {
        const answer = await run();
        if (stallBeforeCommit) {
          process.stderr.write(`${JSON.stringify({ stalledBeforeCommit: write.key })}\n`);
          await new Promise(() => {});
        }
        const recorded = await store.recordIdempotencyKey({
          tenantId,
          key: write.key,
          fingerprint,
          answer: keptAnswer(JSON.stringify(answer), maxAnswerBytes),
          createdAt: now.toISOString(),
          expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
          scope: write.scope ?? {},
        });
        if (!recorded) throw new KeyTaken();
        return answer;
      });
      const entry = { done: attempt.catch(() => undefined), since: now.toISOString() };
      running.set(flight, entry);
      try {
        return { answer: await attempt, replayed: false };
      } catch (error) {
        // A write that failed after another process recorded its key failed for losing the key's race
        // (it ran into that request's write): it is answered by what the key recorded.
        if (!(error instanceof KeyTaken) && !(await recordedSince(tenantId, write.key))) throw error;
      } finally {
        if (running.get(flight) === entry) running.delete(flight);
      }
    }
  };
}

/** Refuses a key outside 1 to 200 visible ASCII characters; the client checks it too, before sending. */
export function checkIdempotencyKey(key: string): void {
  if (keyPattern.test(key)) return;
  throw new MemoryError("invalid_input", "Idempotency-Key must be 1 to 200 visible ASCII characters", 400, {
    data: { issues: [{ path: ["Idempotency-Key"], message: "1 to 200 visible ASCII characters" }] },
  });
}

function reused(key: string, firstUsedAt: string) {
  return new MemoryError(
    "idempotency_key_reused",
    "This Idempotency-Key was used for another request; send a new key for a new write",
    422,
    { data: { key, firstUsedAt } },
  );
}

function inUse(key: string, since: string) {
  return new MemoryError(
    "idempotency_key_in_use",
    "A request with this Idempotency-Key is still running; retry to get its answer",
    409,
    { retryable: true, data: { key, since } },
  );
}

function keptAnswer(answer: string, maxAnswerBytes: number): string {
  const bytes = Buffer.byteLength(answer);
  return bytes <= maxAnswerBytes ? answer : JSON.stringify({ [notKeptMarker]: { bytes } });
}

function replay<T>(key: string, record: { answer: string; createdAt: string }, maxAnswerBytes: number): T {
  const answer = JSON.parse(record.answer) as unknown;
  const notKept = (answer as Record<string, { bytes: number }> | null)?.[notKeptMarker];
  if (notKept !== undefined) {
    throw new MemoryError(
      "idempotency_answer_not_kept",
      "The write under this Idempotency-Key was done once, but its answer was too large to keep; read what it wrote instead",
      409,
      { data: { key, answeredAt: record.createdAt, bytes: notKept.bytes, maxAnswerBytes } },
    );
  }
  return answer as T;
}
