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
 * What a takeover does with a tool (ADR 0213): `recover` — it declares `recover` (or a stdio child
 * listed `tackle/recovers`), asked whether the earlier run's effect landed; `harmless` — running it
 * again makes no second effect (`readOnlyHint` or `idempotentHint`); `none` — it declares neither, and
 * runs again, told so (`context.takeover`, `_meta["tackle/takeover"]`): in that window such a tool is
 * at-least-once, as a call without a key is.
 */
export function takeoverRecovery(tool: AnyTool | undefined): "recover" | "harmless" | "none" {
  if (tool?.recover !== undefined) return "recover";
  if (tool?.annotations?.readOnlyHint === true || tool?.annotations?.idempotentHint === true)
    return "harmless";
  return "none";
}

/** Says on the node's log that a key was taken over, and what the tool's declaration makes of it. */
export function reportTakeover(
  logger: Logger,
  module: string,
  tool: AnyTool | undefined,
  name: string,
  takeover: ToolTakeover,
): void {
  const recovery = takeoverRecovery(tool);
  const fields = { module, tool: name, node: takeover.node, startedAt: takeover.startedAt, recovery };
  if (recovery === "none")
    logger.warn(
      "keyed call taken over from a dead node: its tool declares no recovery (recover, readOnlyHint or idempotentHint), so it runs again, told so by context.takeover; its effect may be made twice",
      fields,
    );
  else logger.info("keyed call taken over from a dead node", fields);
}
