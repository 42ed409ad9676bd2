/** The pool's answers to a worker's host calls: async ones as messages, sync ones on its sync channel. */
import type { Worker } from "node:worker_threads";
import type { Logger } from "@tackle/core";
import type { SandboxRunRequest } from "./create-sandbox-pool.ts";
import { toFailure } from "./run-gate.ts";
import type { PoolWorker } from "./sandbox-pool-run.ts";
import type { HostToWorker, SandboxFailure, SyncAnswer } from "./sandbox-protocol.ts";

export function refuseHostCall(worker: Worker, callId: number): void {
  const answer: HostToWorker = {
    type: "host-answer",
    callId,
    ok: false,
    error: { code: "capability_refused", message: "the call does not belong to the running run" },
  };
  try {
    worker.postMessage(answer);
  } catch {
    // A worker that is gone needs no answer.
  }
}

/** The run's host hook's answer to one call, as data. */
export async function askHost(
  request: SandboxRunRequest,
  method: string,
  payload: unknown,
): Promise<{ ok: boolean; value?: unknown; error?: SandboxFailure }> {
  try {
    if (request.onHostCall === undefined)
      throw Object.assign(new Error(`no host hook answers ${method}`), { code: "no_host_hook" });
    return { ok: true, value: await request.onHostCall(method, payload) };
  } catch (error) {
    return { ok: false, error: toFailure(error, "host_call_failed") };
  }
}

/** Posts a sync call's answer on the worker's sync port, then wakes the worker waiting for it. */
export function answerSync(entry: PoolWorker, answer: SyncAnswer): void {
  if (entry.dead) return;
  try {
    entry.syncPort.postMessage(answer);
  } catch (error) {
    // An answer that cannot be cloned fails the call instead.
    entry.syncPort.postMessage({
      callId: answer.callId,
      ok: false,
      error: {
        code: "host_call_failed",
        message: `the host's answer cannot cross to the script: ${(error as Error).message}`,
      },
    } satisfies SyncAnswer);
  }
  Atomics.store(entry.signal, 0, 1);
  Atomics.notify(entry.signal, 0);
}

export async function answerHostCall(
  worker: Worker,
  request: SandboxRunRequest,
  call: { readonly callId: number; readonly method: string; readonly payload: unknown },
  logger: Logger,
): Promise<void> {
  const { callId, method } = call;
  const asked = await askHost(request, method, call.payload);
  const answer: HostToWorker = {
    type: "host-answer",
    callId,
    ok: asked.ok,
    ...(asked.ok ? { value: asked.value } : { error: asked.error! }),
  };
  try {
    worker.postMessage(answer);
  } catch (error) {
    // An answer that cannot cross fails the call at once (never a wait until the run's limit).
    try {
      worker.postMessage({
        type: "host-answer",
        callId,
        ok: false,
        error: {
          code: "host_call_failed",
          message: `the host's answer to ${method} cannot cross to the script: ${(error as Error).message}`,
        },
      } satisfies HostToWorker);
    } catch (again) {
      logger.debug("sandbox host answer not delivered", { error: (again as Error).message });
    }
  }
}
