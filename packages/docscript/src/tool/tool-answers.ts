/** The tool's answers within their token budgets: run failures, logs, commit outcomes and failures cut with counts. */
import type { SandboxFailure, SandboxLog } from "../sandbox/sandbox-protocol.ts";
import { type Budgets, fitPrefix, tokensOf } from "./budget.ts";
import type { CommitOutcome } from "./edit-plan.ts";
import { elide } from "./plan-preview.ts";
import type { DocScriptResult, ToolFailure } from "./tool-types.ts";

/** A run's failure as the model reads it: sandbox limits keep their codes, anything else in the script is `runtime`. */
export function runError(error: SandboxFailure): ToolFailure {
  const kept = new Set(["timeout", "memory_limit", "syntax_error", "sandbox_crashed", "sandbox_closed"]);
  if (kept.has(error.code)) return error;
  // Where the script failed stays beside the cause; what the refusal said (its issues) is the detail.
  const { line, column, sourceLine, ...detail } = (
    typeof error.data === "object" && error.data !== null ? error.data : {}
  ) as Record<string, unknown>;
  const position = line === undefined ? {} : { line, column, sourceLine };
  return {
    code: "runtime",
    message: error.message,
    data: {
      cause: error.code,
      ...position,
      ...(Object.keys(detail).length === 0 ? {} : { detail }),
    },
  };
}

/** The longest log line kept whole; longer ones read as their head and a count. */
const maxLogLineLength = 2_000;

/** The first log lines that fit the logs budget (each long line shortened), and how many were left out. */
export function fitLogs(
  logs: readonly SandboxLog[],
  budget: number,
): { logs: SandboxLog[]; omitted: number } {
  const shortened = logs.map((line) =>
    line.text.length <= maxLogLineLength
      ? line
      : {
          level: line.level,
          text: `${line.text.slice(0, maxLogLineLength)}… [+${line.text.length - maxLogLineLength} chars]`,
        },
  );
  const { taken } = fitPrefix(shortened, budget, (kept) => kept);
  return { logs: shortened.slice(0, taken), omitted: logs.length - taken };
}

/** A commit outcome within `budget` tokens: its lists (reasons, issues, warnings) cut with counts. */
export function fitOutcome(
  outcome: CommitOutcome,
  budget: number,
): CommitOutcome & { omitted?: Record<string, number> } {
  if (tokensOf(outcome) <= budget) return outcome;
  const lists = (["reasons", "issues", "warnings"] as const).filter((key) =>
    Array.isArray((outcome as Record<string, unknown>)[key]),
  );
  let shown = 20;
  for (;;) {
    const omitted: Record<string, number> = {};
    const cut: Record<string, unknown> = { ...outcome };
    for (const key of lists) {
      const list = (outcome as unknown as Record<string, readonly unknown[]>)[key]!;
      if (list.length > shown) omitted[key] = list.length - shown;
      cut[key] = list.slice(0, shown).map((item) => elide(item));
    }
    const answer = { ...cut, ...(Object.keys(omitted).length === 0 ? {} : { omitted }) } as CommitOutcome & {
      omitted?: Record<string, number>;
    };
    if (shown === 0 || tokensOf(answer) <= budget) return answer;
    shown = Math.floor(shown / 2);
  }
}

/** A failure within the commit budget: its message shortened, listed issues cut with a count, logs fitted. */
export function fitFailure(
  failure: Extract<DocScriptResult, { ok: false }>,
  budgets: Budgets,
): Extract<DocScriptResult, { ok: false }> {
  const logs = failure.logs === undefined ? undefined : fitLogs(failure.logs, budgets.logs);
  let error = failure.error;
  if (tokensOf(error) > budgets.commit) {
    const data = error.data as Record<string, unknown> | undefined;
    const issues = Array.isArray(data?.issues) ? (data.issues as unknown[]) : undefined;
    let shown = 20;
    for (;;) {
      error = {
        code: error.code,
        message:
          failure.error.message.length <= maxLogLineLength
            ? failure.error.message
            : `${failure.error.message.slice(0, maxLogLineLength)}… [+${failure.error.message.length - maxLogLineLength} chars]`,
        ...(data === undefined
          ? {}
          : {
              data:
                issues === undefined
                  ? elide(data)
                  : {
                      ...(elide({ ...data, issues: undefined }) as Record<string, unknown>),
                      issues: issues.slice(0, shown).map((issue) => elide(issue)),
                      issues_omitted: Math.max(0, issues.length - shown),
                    },
            }),
      };
      if (shown === 0 || tokensOf(error) <= budgets.commit) break;
      shown = Math.floor(shown / 2);
    }
  }
  return {
    ok: false,
    op: failure.op,
    error,
    ...(logs === undefined ? {} : { logs: logs.logs }),
    ...(logs === undefined || logs.omitted === 0 ? {} : { logs_omitted: logs.omitted }),
  };
}
