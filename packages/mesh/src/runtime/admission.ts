/**
 * How many of one module's calls a node runs at once (ADR 0214): a caller's legal calls, sent by the
 * thousand, would otherwise all run together, each holding its arguments, its tool's work and its
 * reply. Past `concurrent` a call waits its turn, in order; past `waiting` more it is refused at once,
 * retryable, so the caller can try again later or on another node. A call cancelled while it waits
 * leaves the line.
 */

export interface CallLimits {
  /** Calls of one module that run at once on this node. Default 256. */
  readonly concurrent?: number;
  /** Calls of one module that wait their turn on this node; past them a call is refused. Default 1,024. */
  readonly waiting?: number;
}

export const defaultCallLimits = { concurrent: 256, waiting: 1_024 } as const;

export type Admitted = "admitted" | "full" | "aborted" | "expired";

export interface Admission {
  /**
   * Resolves when the call may run, at once or in its turn; "full" when the line is full too, "aborted"
   * when `signal` fires while it waits, "expired" when it has waited `deadlineMs` (its caller gave up)
   * — also when its turn comes after that, before its timer fired: a call is never admitted late.
   */
  admit(signal: AbortSignal, deadlineMs?: number): Promise<Admitted> | Admitted;
  /** An admitted call ended: the next waiting one whose deadline has not passed runs. */
  release(): void;
  readonly running: number;
  readonly waiting: number;
  readonly limits: Required<CallLimits>;
}

export function createAdmission(limits: CallLimits = {}): Admission {
  const bounds = {
    concurrent: positive(limits.concurrent, defaultCallLimits.concurrent, "concurrent"),
    waiting: atLeastZero(limits.waiting, defaultCallLimits.waiting, "waiting"),
  };
  let running = 0;
  // Waiting calls in arrival order, each with when its caller's limit is spent (`performance.now()`
  // time; Infinity for none); a cancelled one is dropped from wherever it is.
  const line = new Map<(admitted: Admitted) => void, number>();
  return {
    admit(signal, deadlineMs) {
      if (signal.aborted) return "aborted";
      if (running < bounds.concurrent) {
        running += 1;
        return "admitted";
      }
      if (line.size >= bounds.waiting) return "full";
      return new Promise<Admitted>((resolve) => {
        const leave = (why: "aborted" | "expired") => {
          line.delete(turn);
          turn(why);
        };
        const onAbort = () => leave("aborted");
        const timer =
          deadlineMs === undefined ? undefined : setTimeout(() => leave("expired"), Math.max(0, deadlineMs));
        const turn = (admitted: Admitted) => {
          signal.removeEventListener("abort", onAbort);
          if (timer !== undefined) clearTimeout(timer);
          resolve(admitted);
        };
        line.set(turn, deadlineMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + deadlineMs);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
    release() {
      const now = performance.now();
      for (const [turn, expiresAt] of line) {
        line.delete(turn);
        // Its caller's limit is spent, though its timer has not fired (the event loop was held, by a
        // tool computing or a loaded host): it leaves the line as the timer would have had it, never
        // run, and the place goes to the next in line (ADR 0214).
        if (expiresAt <= now) {
          turn("expired");
          continue;
        }
        // The slot passes to it: `running` stays as it is.
        turn("admitted");
        return;
      }
      running -= 1;
    },
    get running() {
      return running;
    },
    get waiting() {
      return line.size;
    },
    limits: bounds,
  };
}

function positive(value: number | undefined, fallback: number, name: string): number {
  const chosen = value ?? fallback;
  if (!Number.isInteger(chosen) || chosen < 1) throw new RangeError(`calls.${name} must be an integer ≥ 1`);
  return chosen;
}

function atLeastZero(value: number | undefined, fallback: number, name: string): number {
  const chosen = value ?? fallback;
  if (!Number.isInteger(chosen) || chosen < 0) throw new RangeError(`calls.${name} must be an integer ≥ 0`);
  return chosen;
}
