/**
 * A sandbox worker's calls to the host: async calls answered as messages, and sync calls that block the
 * worker (never the host) on its sync channel, or on the run's own host channel (ADR 0478), until the
 * host answers or the script's deadline passes.
 */
import { receiveMessageOnPort } from "node:worker_threads";
import type {
  HostToWorker,
  SandboxFailure,
  SandboxHost,
  SyncAnswer,
  SyncChannel,
  WorkerToHost,
} from "./sandbox-protocol.ts";
import type { Run, SyncRoute } from "./sandbox-run.ts";

/** A failure the host answered, as an error the gate hands to the script with its code and data. */
export function hostFailure(error: SandboxFailure | undefined): Error {
  return Object.assign(
    new Error(error?.message ?? "host call failed"),
    error ?? { code: "host_call_failed" },
  );
}

/** The worker's host calls: made with \`send\`, answered on \`sync\` or a run's own channel. */
export interface HostCalls {
  hostFor(runId: number, capability: string): SandboxHost;
  routeOf(message: Extract<HostToWorker, { type: "run" }>, runId: number, capability: string): SyncRoute;
  closeRoute(run: Run): void;
  /** An async call's answer from the host. */
  answer(message: Extract<HostToWorker, { type: "host-answer" }>): void;
}

export function createHostCalls(
  send: (message: WorkerToHost) => void,
  sync: SyncChannel,
  active: () => Run | undefined,
): HostCalls {
  const syncSignal = new Int32Array(sync.signal);
  let nextCallId = 1;
  const hostCalls = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();

  /**
   * Asks the host and blocks until it answers on the sync channel, or until the script's deadline: then
   * the call fails `timeout` (the engine's interrupt ends the script right after). Answers of earlier
   * calls that arrive late are dropped. A host channel whose host has gone fails the call and the run.
   */
  function callHostSync(runId: number, capability: string, method: string, payload: unknown): unknown {
    const run = active();
    if (run === undefined || run.runId !== runId || run.capability !== capability || run.over)
      throw Object.assign(new Error("the run has ended"), { code: "run_ended" });
    const route = run.route;
    const callId = nextCallId++;
    Atomics.store(route.signal, 0, 0);
    try {
      route.post(callId, method, payload);
    } catch (error) {
      // A value that cannot cross to the host fails this call at once, with what could not cross.
      throw Object.assign(
        new Error(`the call's arguments cannot cross to the host: ${(error as Error).message}`),
        { code: "invalid_arguments" },
      );
    }
    for (;;) {
      for (let received = receiveMessageOnPort(route.port); received !== undefined; ) {
        const answer = received.message as SyncAnswer;
        if (answer.callId === callId) {
          if (answer.ok) return answer.value;
          throw hostFailure(answer.error);
        }
        received = receiveMessageOnPort(route.port);
      }
      if (Atomics.load(route.signal, 1) !== 0) {
        run.hostGone = true;
        throw Object.assign(new Error(`the run's host ended while answering ${method}`), {
          code: "run_ended",
        });
      }
      const remaining = run.deadline - performance.now();
      if (remaining <= 0) {
        run.interrupted = true;
        throw Object.assign(new Error(`the host did not answer ${method} before the script's deadline`), {
          code: "timeout",
        });
      }
      Atomics.wait(route.signal, 0, 0, Number.isFinite(remaining) ? remaining : undefined);
      Atomics.store(route.signal, 0, 0);
    }
  }

  /** The dispatcher's way to the host process; every call names its run and carries its capability. */
  function hostFor(runId: number, capability: string): SandboxHost {
    return {
      call(method: string, payload: unknown): Promise<unknown> {
        const callId = nextCallId++;
        return new Promise((resolve, reject) => {
          hostCalls.set(callId, { resolve, reject });
          send({ type: "host-call", runId, capability, callId, method, payload });
        });
      },
      callSync(method: string, payload: unknown): unknown {
        return callHostSync(runId, capability, method, payload);
      },
    };
  }

  /** A run's own host channel is closed with the run: nothing more is asked or answered on it. */
  function closeRoute(run: Run): void {
    if (run.route.port !== sync.port) run.route.port.close();
  }

  /** The pool's sync channel, or the run's own host channel when the pool handed it one. */
  function routeOf(
    message: Extract<HostToWorker, { type: "run" }>,
    runId: number,
    capability: string,
  ): SyncRoute {
    const channel = message.hostChannel;
    if (channel === undefined)
      return {
        port: sync.port,
        signal: syncSignal,
        post: (callId, method, payload) =>
          send({ type: "host-call-sync", runId, capability, callId, method, payload }),
      };
    return {
      port: channel.port,
      signal: new Int32Array(channel.signal),
      post: (callId, method, payload) => channel.port.postMessage({ callId, method, payload }),
    };
  }

  return {
    hostFor,
    routeOf,
    closeRoute,
    answer(message) {
      const waiting = hostCalls.get(message.callId);
      if (waiting === undefined) return;
      hostCalls.delete(message.callId);
      if (message.ok) waiting.resolve(message.value);
      else waiting.reject(hostFailure(message.error));
    },
  };
}
