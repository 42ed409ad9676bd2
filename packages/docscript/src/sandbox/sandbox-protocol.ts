/** The contract between the sandbox pool, its workers and the dispatcher module a worker loads. */

/** Which methods each binding offers the script, and whether a call answers now or later. */
export type SandboxSurface = Readonly<Record<string, Readonly<Record<string, "sync" | "async">>>>;

/** A failure as the script or the host sees it: data, never an object of another realm. */
export interface SandboxFailure {
  readonly code: string;
  readonly message: string;
  readonly data?: unknown;
}

/** How the script itself ended, described inside the sandbox as plain data. */
export type ScriptOutcome =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly error: SandboxFailure & { readonly name?: string; readonly stack?: string };
    };

/** What the worker offers a dispatcher: a way to ask the host (for host-only hooks). */
export interface SandboxHost {
  call(method: string, payload: unknown): Promise<unknown>;
  /**
   * Asks the host and waits for its answer, blocking the worker (not the host): for a sync binding
   * whose answer only the host holds (a document the worker does not keep, ADR 0464). Only while the
   * script runs, and never past its deadline: a late answer fails the call with `timeout`.
   */
  callSync(method: string, payload: unknown): unknown;
}

/** The implementation behind the bindings; it lives in the worker, outside the script's context. */
export interface SandboxDispatcher {
  /** A sync binding call. Throw to refuse it: the script receives a DocScriptError with your code. */
  call(binding: string, method: string, args: readonly unknown[]): unknown;
  /** An async binding call; its answer reaches the script as a settled promise. */
  callAsync?(binding: string, method: string, args: readonly unknown[]): Promise<unknown>;
  /** Called once the script has ended; its value (structured-cloneable) is the run's result. */
  finish(outcome: ScriptOutcome): unknown;
}

/** The module a pool loads in each worker (its default export, or the module itself). */
export interface SandboxDispatcherModule {
  readonly surface: SandboxSurface;
  createDispatcher(input: unknown, host: SandboxHost): SandboxDispatcher | Promise<SandboxDispatcher>;
}

/** A line the script logged through `console`. */
export interface SandboxLog {
  readonly level: "log" | "info" | "warn" | "error" | "debug";
  readonly text: string;
}

/** Where a script error happened, in the script's own lines and columns (1-based), with that line's text. */
export interface ScriptPosition {
  readonly line: number;
  readonly column: number;
  readonly sourceLine: string;
}

/**
 * Messages from the host to a worker. A run's `capability` is a random token the host makes for it;
 * every message the worker sends about the run carries it, and the host acts on none that does not.
 */
export type HostToWorker =
  | {
      readonly type: "run";
      readonly runId: number;
      readonly capability: string;
      readonly script: string;
      readonly input: unknown;
      /** The script's wall-clock limit, counted from its start. */
      readonly timeoutMs: number;
      /** The engine's memory ceiling for the script's values. */
      readonly memoryLimitMb: number;
      /** Where the run's sync host calls go instead of the pool's thread (see `HostChannel`). */
      readonly hostChannel?: HostChannel;
    }
  | {
      readonly type: "host-answer";
      readonly callId: number;
      readonly ok: boolean;
      readonly value?: unknown;
      readonly error?: SandboxFailure;
    };

/** Messages from a worker to the host. */
export type WorkerToHost =
  | { readonly type: "ready" }
  | { readonly type: "boot-failed"; readonly message: string }
  | { readonly type: "started"; readonly runId: number; readonly capability: string }
  | { readonly type: "script-ended"; readonly runId: number; readonly capability: string }
  /** Each console line as it is logged, so a run the watchdog kills still reports how far it got. */
  | { readonly type: "log"; readonly runId: number; readonly capability: string; readonly line: SandboxLog }
  | {
      readonly type: "host-call";
      readonly runId: number;
      readonly capability: string;
      readonly callId: number;
      readonly method: string;
      readonly payload: unknown;
    }
  /** A `callSync` call: answered on the worker's sync channel (see `SyncChannel`), not as a message. */
  | {
      readonly type: "host-call-sync";
      readonly runId: number;
      readonly capability: string;
      readonly callId: number;
      readonly method: string;
      readonly payload: unknown;
    }
  | {
      readonly type: "result";
      readonly runId: number;
      readonly capability: string;
      readonly ok: boolean;
      readonly value?: unknown;
      readonly error?: SandboxFailure;
      readonly logs: readonly SandboxLog[];
      /** The run hit a limit (time, memory) or the engine failed: the host replaces this worker. */
      readonly retire?: boolean;
      /** What the worker holds after the run (its engine's memory and its heap), in bytes. */
      readonly memoryBytes?: number;
    };

/** An answer to a `host-call-sync`, posted on the worker's sync port. */
export interface SyncAnswer {
  readonly callId: number;
  readonly ok: boolean;
  readonly value?: unknown;
  readonly error?: SandboxFailure;
}

/**
 * Each worker's channel for `callSync`: the host posts the answer on `port`, then sets `signal[0]` to 1
 * and wakes the worker waiting on it (`Atomics.wait`), which reads the answer with `receiveMessageOnPort`.
 */
export interface SyncChannel {
  readonly port: import("node:worker_threads").MessagePort;
  readonly signal: SharedArrayBuffer;
}

/**
 * A run's own way to a host that answers its sync calls on another thread than the pool's (a host
 * worker holding the run's document, ADR 0478): the worker posts `{ callId, method, payload }` on
 * `port` and waits on `signal[0]` for a `SyncAnswer` posted back on it. The pool's thread never sees
 * these calls, so a long one cannot block it. `signal[1]` set to 1 says the host has gone (it was
 * stopped or failed): the waiting call fails and the run ends at once.
 */
export interface HostChannel {
  readonly port: import("node:worker_threads").MessagePort;
  /** Two 32-bit words: [0] an answer is waiting, [1] the host has gone. */
  readonly signal: SharedArrayBuffer;
}

/** A sync call on a `HostChannel`, as the host reads it from its end of the port. */
export interface HostChannelCall {
  readonly callId: number;
  readonly method: string;
  readonly payload: unknown;
}
