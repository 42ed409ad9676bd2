/**
 * A call under an idempotency key on a serving node: through the module's results ledger (ADR 0210),
 * and on a takeover — the key's earlier run was on a node that died mid-call — by the tool's recovery
 * contract (ADR 0213).
 */
import { type AnyTool, DEFAULT_TIMEOUT_MS, type Logger, ToolError, type ToolTakeover } from "@tackle/core";
import type { KeyedExecute, KeyedOutcome, ResultsLedger } from "./keyed-once.ts";

export interface KeyedRunSite {
  readonly module: string;
  readonly logger: Logger;
  /** This node process's alive subject. */
  readonly alive: string;
}

/** A keyed call through the results ledger; a ledger it cannot reach refuses the call (it did not run). */
export async function keyedRun(
  site: KeyedRunSite,
  results: ResultsLedger,
  call: { tool: string; key: string; args: unknown; timeout: number; signal: AbortSignal },
  execute: KeyedExecute,
): Promise<KeyedOutcome> {
  const name = `${site.module}.${call.tool}`;
  try {
    return await results.once(
      {
        tool: call.tool,
        key: call.key,
        args: call.args,
        alive: site.alive,
        signal: call.signal,
        deadline:
          Date.now() +
          (Number.isFinite(call.timeout) && call.timeout > 0 ? call.timeout : DEFAULT_TIMEOUT_MS),
      },
      execute,
    );
  } catch (error) {
    site.logger.error("results ledger unreachable: a call under an idempotency key refused", {
      module: site.module,
      tool: call.tool,
      error: (error as Error)?.message ?? String(error),
    });
    return {
      ok: false,
      error: new ToolError(
        "unavailable",
        `"${name}" was not run: its results ledger (JetStream KV) could not be reached to run it once under its idempotency key: ${(error as Error)?.message ?? String(error)}`,
        { retryable: true, data: { tool: name } },
      ),
    };
  }
}

/**
 * Whether a tool may be run on a takeover: it can tell whether the earlier run's effect landed (it
 * declares `recover`, or a stdio child listed `tackle/recovers`), or running it again makes no second
 * effect (`readOnlyHint` or `idempotentHint`). Any other is refused `outcome_unknown`, not retryable:
 * neither the node nor the ledger can know whether its effect landed, and running it again could make
 * it twice. The refusal is the key's recorded outcome, so every repeat gets it.
 */
export function takeoverRefusal(
  module: string,
  tool: AnyTool | undefined,
  takeover: ToolTakeover,
): ToolError | undefined {
  if (tool === undefined) return undefined;
  if (tool.recover !== undefined) return undefined;
  if (tool.annotations?.readOnlyHint === true || tool.annotations?.idempotentHint === true) return undefined;
  const name = `${module}.${tool.name}`;
  return new ToolError(
    "outcome_unknown",
    `"${name}" under this idempotency key was running on ${takeover.node} (since ${takeover.startedAt}) when that node died, before its outcome was recorded; whether its effect happened is unknown, and the tool declares no way to find out (recover, or readOnlyHint/idempotentHint), so it was not run again. Check its effect, and call with a new key if it did not happen`,
    { retryable: false, data: { tool: name, node: takeover.node, startedAt: takeover.startedAt } },
  );
}
