/** A stored run as a caller sees it. */
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { RunRecord } from "../store/durable-store.ts";
import type { RunSnapshot } from "./run-snapshot.ts";

export function snapshotOf<State>(
  run: RunRecord,
  state: State,
  interrupts: readonly InterruptRequest[],
): RunSnapshot<State> {
  return {
    threadId: run.threadId,
    runId: run.runId,
    graph: run.graph,
    status: run.status,
    state,
    node: run.node,
    interrupts,
    ...(run.error === null ? {} : { error: JSON.parse(run.error) }),
  };
}
