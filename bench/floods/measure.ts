/**
 * What a flood costs the process that serves it: the peak RSS above what it held just before the flood,
 * the wall time, and the event-loop delay (every other caller of this host waits on it). Each flood runs
 * in a fresh child process (`flood-child.ts`), so one row's memory is not another's.
 */
import { existsSync, statSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";

/** The service as shipped (its default bounds), or with the bound under study lifted. */
export type Variant = "bounded" | "unbounded";

/** One row of the table: one flood against one configuration of its service. */
export interface FloodRow {
  /** `durable: state`, … */
  readonly flood: string;
  /** What the flooding caller sends, in words and numbers. */
  readonly workload: string;
  /** `bounded (maxStateBytes 4 MiB)` or `unbounded (maxStateBytes: Infinity)`. */
  readonly service: string;
  /** Calls the service accepted (answered as a success, or taken and held). */
  readonly accepted: number;
  /** Calls refused, by HTTP status and code. */
  readonly refused: Record<string, number>;
  /** Peak RSS above the RSS just before the flood, in bytes. */
  readonly peakRssBytes: number;
  /** Bytes the flood left stored (the SQLite file with its WAL), when it stores anything. */
  readonly storedBytes?: number;
  readonly wallMs: number;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /** What else the row shows (the largest answer, the slowest call, …). */
  readonly notes: string;
}

export interface Measured<T> {
  readonly value: T;
  readonly peakRssBytes: number;
  readonly wallMs: number;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

/** The measured fields of a row. */
export function rest(
  result: Measured<unknown>,
): Pick<FloodRow, "peakRssBytes" | "wallMs" | "loopDelayP99Ms" | "loopDelayMaxMs"> {
  const { peakRssBytes, wallMs, loopDelayP99Ms, loopDelayMaxMs } = result;
  return { peakRssBytes, wallMs, loopDelayP99Ms, loopDelayMaxMs };
}

const gc = (globalThis as { gc?: () => void }).gc;

/**
 * Runs `work` and measures it: RSS sampled every 10 ms, and the process's own peak (`maxRSS`, which a
 * sample cannot miss while the loop is blocked) when that peak was reached during the flood.
 */
export async function measured<T>(work: () => Promise<T>): Promise<Measured<T>> {
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 200));
  gc?.();
  const before = process.memoryUsage.rss();
  const maxBefore = process.resourceUsage().maxRSS * 1024;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  // The histogram records from its timer's second tick on: a flood that holds the loop from its first
  // instant would be missed.
  await new Promise((resolve) => setTimeout(resolve, 30));
  const started = performance.now();
  try {
    const value = await work();
    const wallMs = performance.now() - started;
    // A loop held by synchronous work is recorded when the loop next turns: let it turn.
    await new Promise((resolve) => setTimeout(resolve, 30));
    const maxAfter = process.resourceUsage().maxRSS * 1024;
    if (maxAfter > maxBefore) peak = Math.max(peak, maxAfter);
    peak = Math.max(peak, process.memoryUsage.rss());
    return {
      value,
      peakRssBytes: peak - before,
      wallMs,
      loopDelayP99Ms: delay.percentile(99) / 1e6,
      loopDelayMaxMs: delay.max / 1e6,
    };
  } finally {
    clearInterval(sampler);
    delay.disable();
  }
}

/** A SQLite file's bytes with its WAL and shared-memory files. */
export function sqliteBytes(path: string): number {
  let bytes = 0;
  for (const suffix of ["", "-wal", "-shm"])
    if (existsSync(path + suffix)) bytes += statSync(path + suffix).size;
  return bytes;
}

/** Counts one refusal under `status code`. */
export function countRefusal(
  refused: Record<string, number>,
  status: number,
  code: string | undefined,
): void {
  const key = `${status} ${code ?? "?"}`;
  refused[key] = (refused[key] ?? 0) + 1;
}

/** The `error.code` of a JSON error answer (durable, memory) or a docscript problem (`code` at the top). */
export function errorCode(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { code?: string } | string; code?: string };
    if (typeof parsed.error === "object" && parsed.error !== null) return parsed.error.code;
    return parsed.code ?? (typeof parsed.error === "string" ? parsed.error : undefined);
  } catch {
    return undefined;
  }
}

export const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 1 : 0);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `task(i)` for i in [0, count) with at most `width` at once. */
export async function inParallel(
  count: number,
  width: number,
  task: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, lane));
}
