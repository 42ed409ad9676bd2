/** What `get`, `start` and `resume` answer: a run as a caller sees it. */
import type { ToolErrorPayload } from "@tackle/core";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { RunStatus } from "../store/durable-store.ts";

export interface RunSnapshot<State = Record<string, unknown>> {
  readonly threadId: string;
  readonly runId: string;
  readonly graph: string;
  readonly status: RunStatus;
  readonly state: State;
  /** The node to run next (the paused one while paused), or null once the run ended. */
  readonly node: string | null;
  /** The open interrupts while paused; answer each by id. */
  readonly interrupts: readonly InterruptRequest[];
  readonly error?: ToolErrorPayload & { readonly node?: string };
}
