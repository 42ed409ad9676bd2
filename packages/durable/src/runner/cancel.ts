/** Ending a run from outside: `cancel` and a caller's abort signal. */
import { randomUUID } from "node:crypto";
import { ToolAbortedError } from "@tackle/core";
import { decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { Frame, JournalRecord } from "../store/durable-store.ts";
import { toFrameData } from "./frame-data.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { Launched } from "./runner-api.ts";
import { type RunnerState, storedSnapshot } from "./runner-state.ts";

/** The run's end, or, once `signal` aborts, its cancellation and a rejection with `aborted`. */
export function untilCancelled<State extends object>(
  state: RunnerState,
  launched: Launched<State>,
  signal: AbortSignal | undefined,
  name: string,
): Promise<RunSnapshot<State>> {
  if (signal === undefined) return launched.finished;
  return new Promise<RunSnapshot<State>>((resolve, reject) => {
    // Once aborted, the call's answer is `aborted`, even when the cancel ends the run first.
    let aborting = false;
    const onAbort = () => {
      aborting = true;
      const aborted = new ToolAbortedError(name, signal.reason);
      // The run is cancelled first, so the caller that sees `aborted` finds it cancelled.
      cancel(state, launched.threadId, "the caller aborted").then(
        () => reject(aborted),
        // It paused or ended as the abort came: nothing is left to cancel.
        () => reject(aborted),
      );
    };
    if (signal.aborted) onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    launched.finished
      .then(
        (snapshot) => {
          if (!aborting) resolve(snapshot);
        },
        (error: unknown) => {
          if (!aborting) reject(error);
        },
      )
      .finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export async function cancel<State extends object>(
  state: RunnerState,
  threadId: string,
  reason = "cancelled",
): Promise<RunSnapshot<State>> {
  const { store } = state;
  const run = await store.getRun(threadId);
  if (run === undefined) throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
  if (run.status === "cancelled") return storedSnapshot<State>(state, threadId);
  if (run.status !== "running" && run.status !== "paused") {
    throw new DurableError(
      "run_not_active",
      `Thread "${threadId}" is ${run.status}; there is nothing to cancel`,
      {
        data: { status: run.status },
      },
    );
  }
  const runtime = state.current.get(threadId);
  // In-flight steps here see their signals abort at once; another process's, at its next write.
  runtime?.abort(new DurableError("run_cancelled", `The run was cancelled: ${reason}`));
  const owner = randomUUID();
  const claimed = await store.claimRun(threadId, owner, ["running", "paused"]);
  if (claimed === undefined) return storedSnapshot<State>(state, threadId);
  // Its expiry has nothing left to resume.
  state.expiries.drop(threadId);
  let seq = claimed.lastSeq;
  const frames: Frame[] = [];
  const journal: JournalRecord[] = [];
  const cards = new Map<string, { name: string; params: unknown }>();
  for (const call of runtime?.openToolCalls.values() ?? []) cards.set(call.id, call);
  for (const entry of decodeValue(claimed.run.interrupts, "interrupts") as InterruptRequest[]) {
    const request = (entry.request ?? {}) as {
      kind?: string;
      toolCallId?: string;
      toolName?: string;
      params?: unknown;
    };
    if (request.kind !== "approval") continue;
    // The pending approval is answered as cancelled, in the journal and on its card.
    journal.push({
      key: `answer:${entry.id}`,
      name: "answer",
      state: "done",
      attempt: 1,
      value: encodeValue({ approved: false, cancelled: true, reason }, "the cancellation"),
    });
    if (request.toolCallId !== undefined) {
      cards.set(request.toolCallId, { name: request.toolName ?? "tool", params: request.params });
    }
  }
  for (const [id, card] of cards) {
    frames.push({
      type: "tool_call",
      seq: ++seq,
      data: toFrameData({ id, name: card.name, status: "cancelled", params: card.params, reason }),
    });
  }
  frames.push({ type: "run_cancelled", seq: ++seq, data: { reason } });
  await store.commit(threadId, owner, {
    frames,
    journal,
    run: { status: "cancelled", interrupts: encodeValue([], "interrupts") },
  });
  state.landed.emit(threadId);
  state.logger.info("durable run cancelled", { threadId, runId: run.runId, reason });
  return storedSnapshot<State>(state, threadId);
}
