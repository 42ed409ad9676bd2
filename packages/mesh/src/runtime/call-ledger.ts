/**
 * What a node remembers of its calls after they end, so a caller whose reply or request a broker
 * outage swallowed can learn which (ADR 0208): the reply subjects of recently finished calls with their
 * outcome, in a fixed ring (an array write per call, no hashing), and the reply subjects it has
 * promised a caller never to run ("disowned": it had not seen them when asked).
 */

/** Finished calls remembered per module (about 2 MiB of references at most). */
export const FINISHED_KEPT = 32_768;
/** How long a disowned request is refused if it still arrives, and how many are kept. */
const disownedMs = 120_000;
const disownedKept = 65_536;

export interface FinishedCall {
  readonly reply: string;
  /** `ok`, or the error code it was answered with. */
  readonly outcome: string;
}

export interface CallLedger {
  /** A call ended: its reply went out (or was lost) with this outcome. */
  finished(reply: string, outcome: string): void;
  /** Which of `replies` finished here, scanning the ring once. */
  findFinished(replies: ReadonlySet<string>): FinishedCall[];
  /** How far back, in ms, every finished call is remembered. */
  rememberedMs(): number;
  /** Promises never to run a request with this reply subject if it still arrives. */
  disown(reply: string): void;
  /** A request the node promised not to run. */
  isDisowned(reply: string): boolean;
}

export function createCallLedger(capacity = FINISHED_KEPT): CallLedger {
  const replies: (string | undefined)[] = new Array(capacity);
  const outcomes: (string | undefined)[] = new Array(capacity);
  const endedAt = new Float64Array(capacity);
  const createdAt = performance.now();
  let next = 0;
  let wrapped = false;
  const disowned = new Map<string, number>();

  return {
    finished(reply, outcome) {
      replies[next] = reply;
      outcomes[next] = outcome;
      endedAt[next] = performance.now();
      next += 1;
      if (next === capacity) {
        next = 0;
        wrapped = true;
      }
    },
    findFinished(wanted) {
      const found: FinishedCall[] = [];
      if (wanted.size === 0) return found;
      for (let index = 0; index < capacity; index += 1) {
        const reply = replies[index];
        if (reply !== undefined && wanted.has(reply))
          found.push({ reply, outcome: outcomes[index] as string });
      }
      return found;
    },
    rememberedMs() {
      // Until the ring wraps, everything since the module was first served is there.
      return Math.floor(performance.now() - (wrapped ? (endedAt[next] as number) : createdAt));
    },
    disown(reply) {
      const now = performance.now();
      for (const [key, at] of disowned) {
        if (now - at < disownedMs && disowned.size < disownedKept) break;
        disowned.delete(key);
      }
      disowned.set(reply, now);
    },
    isDisowned(reply) {
      return disowned.size > 0 && disowned.has(reply);
    },
  };
}
