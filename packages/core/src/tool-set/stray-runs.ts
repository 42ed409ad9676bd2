/**
 * Runs that outlived their calls (ADR 0540). A call answers `timeout` or `aborted` on time even when
 * its tool ignores its signal; the tool's handler then runs on, unseen by every bound that counts
 * calls (a server's requests in flight are given back when the caller hangs up). A caller who starts
 * and cancels calls of such a tool in a loop would start handlers without end. The set counts each
 * tool's stray runs until they settle, and past `maxStrayRuns` refuses that tool's new calls with a
 * retryable `overloaded` before they run: what a flood of cancels costs the host is bounded per tool.
 */
import { ToolError } from "../errors/tool-error.ts";
import type { Logger } from "../tool/logger.ts";

/** The default of `maxStrayRuns`: as many as a server's requests in flight (ADR 0534). */
export const defaultMaxStrayRuns = 64;

/** The `data` of the refusal. */
export interface StrayRunsData {
  readonly tool: string;
  /** This tool's runs still going after their calls answered. */
  readonly strayRuns: number;
  readonly maxStrayRuns: number;
}

export interface StrayRuns {
  /** The refusal for a new call of `tool` while it holds `maxStrayRuns` stray runs; else undefined. */
  refusal(tool: string, calledAs: string): ToolError<"overloaded", StrayRunsData> | undefined;
  /** Counts `running` as a stray run of `tool` until it settles, whichever way. */
  track(tool: string, calledAs: string, running: Promise<unknown>, logger: Logger): void;
}

/** The set's count of stray runs per tool name; `maxStrayRuns` checked (a whole number ≥ 1, or Infinity). */
export function createStrayRuns(maxStrayRuns: number = defaultMaxStrayRuns): StrayRuns {
  if (
    !(maxStrayRuns === Number.POSITIVE_INFINITY || (Number.isSafeInteger(maxStrayRuns) && maxStrayRuns >= 1))
  ) {
    throw new ToolError(
      "invalid_max_stray_runs",
      `maxStrayRuns must be a whole number of runs, at least 1, or Infinity (got ${maxStrayRuns})`,
      { data: { maxStrayRuns } },
    );
  }
  const strays = new Map<string, number>();
  return {
    refusal(tool, calledAs) {
      const held = strays.get(tool) ?? 0;
      if (held < maxStrayRuns) return undefined;
      return new ToolError(
        "overloaded",
        `Tool "${calledAs}" has ${held} runs still going after their calls ended (it does not stop when its signal aborts); a new call runs when one of them ends`,
        { retryable: true, data: { tool: calledAs, strayRuns: held, maxStrayRuns } },
      );
    },
    track(tool, calledAs, running, logger) {
      const held = (strays.get(tool) ?? 0) + 1;
      strays.set(tool, held);
      // Once when the tool starts straying and once when it fills its bound: a flood logs two lines.
      if (held === 1 || held === maxStrayRuns) {
        logger.warn(`tool "${calledAs}" runs on after its call ended: it ignores its abort signal`, {
          tool: calledAs,
          strayRuns: held,
          maxStrayRuns,
        });
      }
      const settled = () => {
        const left = (strays.get(tool) ?? 1) - 1;
        if (left === 0) strays.delete(tool);
        else strays.set(tool, left);
      };
      running.then(settled, settled);
    },
  };
}
