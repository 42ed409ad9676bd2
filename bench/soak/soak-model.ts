/** What the soak counts, per operation and per row, and how a row is printed. */

export type Workload =
  | "mesh calls"
  | "document pushes"
  | "durable runs"
  | "memory adds"
  | "memory import jobs";

export interface SoakRow {
  readonly workload: Workload;
  readonly fault: string;
  readonly attempted: number;
  /** Acknowledged, and (for stored effects) found at the end. */
  readonly succeeded: number;
  /** Failed with an error the caller saw (retryable or not). */
  readonly failedReported: number;
  /** Never settled within its deadline, or acknowledged but missing at the end. */
  readonly lost: number;
  /** Effects present more than once outside any stated window. Must be 0. */
  readonly duplicated: number;
  /**
   * Durable only: a tool run again by the process that took its run over, because its outcome had not
   * landed when the run's driver died or lost its database (durable's stated crash window). Undefined
   * for workloads that state no such window.
   */
  readonly duplicatedCrashWindow?: number;
  readonly p50: Record<Phase, number>;
  readonly p99: Record<Phase, number>;
  /** Operations (of any fault) that succeeded after this fault was repaired and before the next one. */
  readonly succeededAfterRepair: number;
}

export interface SoakResult {
  readonly rows: SoakRow[];
  /** Work the killed process had in hand that another process finished. */
  readonly takeovers: {
    /** Durable runs started around the runner SIGKILL that another runner took over (run_recovered). */
    readonly durableRuns: number;
    /** Import jobs the killed memory service held that the other service finished. */
    readonly memoryJobs: number;
  };
  /** What the table does not show: takeovers seen, and how each crash-window duplicate came about. */
  readonly notes: string[];
}

export type Phase = "before" | "during" | "after";

/** One operation, counted under the fault and phase it started in; deferred ones settle at the end. */
export interface Op {
  readonly fault: number;
  readonly phase: Phase;
  outcome: "ok" | "failed" | "lost";
  ms: number;
  duplicated: number;
  crashWindow: number;
  /** performance.now() when it settled. */
  endedAt: number;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};

const phases: Phase[] = ["before", "during", "after"];

export function summarize(
  workload: Workload,
  fault: string,
  ops: Op[],
  crashWindow: boolean,
): Omit<SoakRow, "succeededAfterRepair"> {
  // Latency of every operation that settled (succeeded or failed); a lost one has none.
  const byPhase = (phase: Phase) =>
    ops.filter((op) => op.phase === phase && op.outcome !== "lost").map((op) => op.ms);
  const perPhase = (p: number) =>
    Object.fromEntries(phases.map((phase) => [phase, percentile(byPhase(phase), p)])) as Record<
      Phase,
      number
    >;
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  return {
    workload,
    fault,
    attempted: ops.length,
    succeeded: ops.filter((op) => op.outcome === "ok").length,
    failedReported: ops.filter((op) => op.outcome === "failed").length,
    lost: ops.filter((op) => op.outcome === "lost").length,
    duplicated: sum(ops.map((op) => op.duplicated)),
    ...(crashWindow ? { duplicatedCrashWindow: sum(ops.map((op) => op.crashWindow)) } : {}),
    p50: perPhase(50),
    p99: perPhase(99),
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it answers, or `timeoutMs` passes (then undefined). */
export async function until<T>(
  check: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(100);
  }
  return undefined;
}

/** A JSON request to a durable runner; a network error comes back as status 0 with its code. */
export async function durableRequest(
  base: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown>; code?: string }> {
  try {
    const response = await fetch(`${base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      ...(body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      signal: AbortSignal.timeout(15_000),
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { status: 0, json: {}, code: cause?.code ?? (error as Error).name };
  }
}

export function formatTable(rows: readonly SoakRow[]): string {
  const ms = (value: number) => (Number.isNaN(value) ? "–" : value.toFixed(0));
  const lines = [
    "| workload | fault | attempted | succeeded | failed, reported | lost | duplicated (outside) | duplicated (crash window) | p50 ms before / during / after | p99 ms before / during / after |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.workload} | ${row.fault} | ${row.attempted} | ${row.succeeded} | ${row.failedReported} | ${row.lost} | ${row.duplicated} | ${row.duplicatedCrashWindow ?? "–"} | ${ms(row.p50.before)} / ${ms(row.p50.during)} / ${ms(row.p50.after)} | ${ms(row.p99.before)} / ${ms(row.p99.during)} / ${ms(row.p99.after)} |`,
    );
  }
  return lines.join("\n");
}
