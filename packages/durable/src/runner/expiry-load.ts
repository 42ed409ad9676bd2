/**
 * Approval expiries that outlive the runner that paused the run (ADR 0124): the store keeps each paused
 * run's soonest expiry (`expires_at`), a runner loads the ones due soon, soonest first a page at a time,
 * into its one-timer queue (`expiry.ts`), and a run due is resumed — answered as expired — only when a
 * driving place is free, so a burst of expiries waits its turn instead of passing `maxDrivingRuns`.
 */
import { createPlaces } from "@tackle/core/internal";
import { decodeValue } from "../codec/codec.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { ExpiringRun } from "../store/durable-store.ts";
import { expiryOf } from "./answers.ts";
import { resumeAtExpiry } from "./resume.ts";
import type { ExpiryOptions, RunnerOptions } from "./runner-api.ts";
import type { RunnerState } from "./runner-state.ts";

/**
 * Driving places, per key (a tenant): what a resume at an expiry takes before it drives the run, as a
 * start or resume over HTTP does. `onFree` hears each place given back, so a waiting expiry takes it.
 */
export interface DrivingGate {
  keyOf(threadId: string): string;
  take(key: string): (() => void) | undefined;
  onFree(listener: () => void): () => void;
}

/** A runner's hook for `limitDrivingRuns`: its expiries then take the HTTP API's driving places. */
export const drivingGateHook: unique symbol = Symbol.for("@tackle/durable.drivingGate");

/** Expiries due at once when no app gives a gate: this many resumed at a time by one runner. */
export const defaultExpiryPlaces = 64;

/** The soonest expiry among open interrupts (ms since the epoch), or undefined when none expires. */
export function firstExpiry(open: readonly InterruptRequest[]): number | undefined {
  const first = Math.min(...open.map((entry) => expiryOf(entry) ?? Number.POSITIVE_INFINITY));
  return Number.isFinite(first) ? first : undefined;
}

/** A gate over places of its own, one key for the whole runner. */
export function ownGate(max: number): DrivingGate {
  const places = createPlaces({ max, name: "expiry places" });
  const listeners = new Set<() => void>();
  return {
    keyOf: () => "",
    take(key) {
      const free = places.take(key);
      if (free === undefined) return undefined;
      return () => {
        free();
        for (const listener of listeners) listener();
      };
    },
    onFree(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Runs whose expiry fell due, waiting per key for a driving place, and the resumes they become. */
export interface ExpiryDriver {
  /** The expiry queue's callback: resume `threadId` once its key has a driving place. */
  due(threadId: string): void;
  /** Resumes at expiries now wait on this gate's places. */
  useGate(gate: DrivingGate): void;
  /** Runs due and waiting for a place. */
  waiting(): number;
  /** Forgets the waiting runs and waits for the resumes in flight. */
  close(): Promise<void>;
}

export function createExpiryDriver(state: RunnerState): ExpiryDriver {
  let gate = ownGate(defaultExpiryPlaces);
  let unsubscribe = gate.onFree(() => pump());
  const queues = new Map<string, Set<string>>();
  const inFlight = new Set<Promise<void>>();
  let count = 0;
  const pump = () => {
    for (const [key, queue] of queues) {
      for (const threadId of queue) {
        if (state.closed) return;
        const free = gate.take(key);
        if (free === undefined) break;
        queue.delete(threadId);
        count--;
        const resumed = resumeExpired(state, threadId).finally(() => {
          inFlight.delete(resumed);
          free();
        });
        inFlight.add(resumed);
      }
      if (queue.size === 0) queues.delete(key);
    }
  };
  return {
    due(threadId) {
      if (state.closed) return;
      const key = gate.keyOf(threadId);
      const queue = queues.get(key) ?? new Set<string>();
      queues.set(key, queue);
      if (queue.has(threadId)) return;
      queue.add(threadId);
      count++;
      pump();
    },
    useGate(next) {
      unsubscribe();
      gate = next;
      unsubscribe = gate.onFree(() => pump());
      // Waiting runs were keyed by the old gate: key them anew.
      const waiting = [...queues.values()].flatMap((queue) => [...queue]);
      queues.clear();
      count = 0;
      for (const threadId of waiting) this.due(threadId);
    },
    waiting: () => count,
    async close() {
      queues.clear();
      count = 0;
      unsubscribe();
      await Promise.allSettled([...inFlight]);
    },
  };
}

/**
 * Resumes a paused run whose expiry fell due: its resume answers the expired approvals as such. Only a
 * paused run: one answered, cancelled or resumed since (by anyone, anywhere) is left alone, and the
 * resume's claim (`ifOwner`) lets one of two runners firing the same expiry write its answers.
 */
async function resumeExpired(state: RunnerState, threadId: string): Promise<void> {
  try {
    if (state.closed || state.active.has(threadId)) return;
    const run = await state.store.getRun(threadId);
    if (run?.status !== "paused") return;
    const at = firstExpiry(decodeValue(run.interrupts, "interrupts") as InterruptRequest[]);
    if (at === undefined) return;
    // Loaded early (another machine's clock, a rounded time): wait for the approval's own time.
    if (at > Date.now()) return state.expiries.schedule(threadId, at);
    await (await resumeAtExpiry(state, threadId)).finished;
  } catch (error) {
    state.logger.warn("durable approval expiry could not resume the run", {
      threadId,
      error: String(error),
    });
  }
}

export interface ExpiryLoader {
  /** Stops looking and waits for a look in progress. */
  stop(): Promise<void>;
}

/** Loads the expiries due within twice `everyMs`, at once and every `everyMs` (ADR 0124). */
export function startExpiryLoader(state: RunnerState, options: RunnerOptions["expiries"]): ExpiryLoader {
  if (options === false) return { stop: async () => {} };
  const settings = loaderSettings(options);
  let timer: NodeJS.Timeout | undefined;
  let looking: Promise<void> = Promise.resolve();
  const schedule = (delayMs: number) => {
    if (state.closed) return;
    timer = setTimeout(() => {
      looking = look(state, settings).then(
        (next) => schedule(Math.max(0, Math.min(settings.everyMs, next - Date.now()))),
        (error: unknown) => {
          state.logger.warn("durable approval expiries could not be read", { error: String(error) });
          schedule(settings.everyMs);
        },
      );
    }, delayMs);
    timer.unref();
  };
  schedule(0);
  return {
    async stop() {
      clearTimeout(timer);
      await looking;
    },
  };
}

type LoaderSettings = Required<ExpiryOptions>;

function loaderSettings(options: ExpiryOptions | undefined): LoaderSettings {
  const whole = (value: number | undefined, fallback: number, least: number) =>
    Math.max(least, Math.floor(value ?? fallback));
  return {
    everyMs: whole(options?.everyMs, 30_000, 50),
    pageSize: whole(options?.pageSize, 256, 1),
    maxLoaded: whole(options?.maxLoaded, 4096, 1),
  };
}

/**
 * One look: pages of expiries due within the horizon, soonest first, into the queue, until a short page
 * or `maxLoaded` (less the runs due and waiting for a place). Answers when to look next: at the last
 * expiry loaded when the bound cut the look short (the ones after it are later), else the interval.
 */
async function look(state: RunnerState, settings: LoaderSettings): Promise<number> {
  const regular = Date.now() + settings.everyMs;
  const graphs = [...state.graphs.keys()];
  if (graphs.length === 0) return regular;
  const dueBy = Date.now() + 2 * settings.everyMs;
  let budget = settings.maxLoaded - state.expiring.waiting();
  let after: ExpiringRun | undefined;
  for (;;) {
    if (state.closed) return regular;
    // Full: look again when the last one loaded falls due, or soon when a burst waits for places.
    if (budget <= 0) return after?.expiresAt ?? Date.now() + Math.min(settings.everyMs, 1000);
    const limit = Math.min(settings.pageSize, budget);
    const page = await state.store.findExpiringRuns({
      dueBy,
      graphs,
      limit,
      ...(after === undefined ? {} : { after }),
    });
    for (const run of page) {
      if (!state.active.has(run.threadId)) state.expiries.schedule(run.threadId, run.expiresAt);
    }
    if (page.length < limit) return regular;
    budget -= page.length;
    after = page.at(-1);
  }
}
