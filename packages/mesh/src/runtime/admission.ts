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
   * when `signal` fires while it waits, "expired" when it has waited `deadlineMs` (its caller gave up).
   */
  admit(signal: AbortSignal, deadlineMs?: number): Promise<Admitted> | Admitted;
  /** An admitted call ended: the next waiting one runs. */
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
  // Waiting calls in arrival order; a cancelled one is dropped from wherever it is.
  const line = new Set<(admitted: Admitted) => void>();
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
        line.add(turn);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
    release() {
      const next = line.values().next();
      if (next.done === true) {
        running -= 1;
        return;
      }
      // The slot passes to the next in line: `running` stays as it is.
      line.delete(next.value);
      next.value("admitted");
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
