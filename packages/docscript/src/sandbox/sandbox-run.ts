/** A sandbox worker's run, and the failures it ends with: where the script was and why it stopped. */
import type { MessagePort } from "node:worker_threads";
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime } from "quickjs-emscripten-core";
import type { RunGate } from "./run-gate.ts";
import type {
  SandboxDispatcher,
  SandboxFailure,
  SandboxLog,
  ScriptOutcome,
  ScriptPosition,
} from "./sandbox-protocol.ts";
import { boundScriptFailure } from "./script-failure-bounds.ts";

/** The script's first line follows this one: reported line N is the script's line N - 1. */
export const scriptPrefix = '(async function editScript() {"use strict";\n';
export const scriptFile = "edit-script.js";

/** The worker's engine state: set when the engine's memory refused to grow (the run ends `memory_limit`). */
export const engineState = { growthRefused: false };

/** Where a run's sync calls go: its own host channel (a host worker), else the pool's thread. */
export interface SyncRoute {
  readonly port: MessagePort;
  readonly signal: Int32Array;
  /** The pool's thread reads its calls as messages of the worker; a host channel's as its own. */
  post(callId: number, method: string, payload: unknown): void;
}

export interface Run {
  readonly runId: number;
  readonly capability: string;
  readonly script: string;
  readonly timeoutMs: number;
  readonly memoryLimitMb: number;
  readonly logs: SandboxLog[];
  readonly dispatcher: SandboxDispatcher;
  readonly gate: RunGate;
  readonly runtime: QuickJSRuntime;
  readonly context: QuickJSContext;
  /** The engine's interrupt handler ends the script once `performance.now()` passes this. */
  deadline: number;
  interrupted: boolean;
  outcome?: ScriptOutcome;
  settle?: QuickJSHandle;
  audit?: QuickJSHandle;
  deadlineTimer?: NodeJS.Timeout;
  over: boolean;
  /** Where the run's sync host calls go. */
  readonly route: SyncRoute;
  /** The run's host channel reported its host gone: the run ends `sandbox_crashed`. */
  hostGone: boolean;
  /** Where the engine was when a limit stopped the script. */
  place?: ScriptPosition;
}

/** A script error's place in the script's own coordinates, read from the engine's description. */
export function positionOf(script: string, stack: string | undefined): ScriptPosition | undefined {
  if (stack === undefined) return undefined;
  const match = /edit-script\.js:(\d+)(?::(\d+))?/.exec(stack);
  if (match === null) return undefined;
  const line = Number(match[1]) - 1;
  const column = match[2] === undefined ? 1 : Number(match[2]);
  const lines = script.split("\n");
  if (line < 1 || line > lines.length) return undefined;
  return { line, column, sourceLine: lines[line - 1]!.slice(0, 300) };
}

export function memoryFailure(run: Run): SandboxFailure {
  return { code: "memory_limit", message: `the script exceeded the ${run.memoryLimitMb} MB heap ceiling` };
}

export function timeoutFailure(run: Run): SandboxFailure {
  const written = run.gate.answered();
  const writes = Object.entries(written)
    .map(([call, count]) => `${call} ×${count}`)
    .join(", ");
  // The engine knows the place of the script's last call out of plain code (a binding, a built-in).
  const where =
    run.place === undefined ? "" : ` (last seen at line ${run.place.line}, column ${run.place.column})`;
  return {
    code: "timeout",
    message: `the script did not finish within ${run.timeoutMs} ms${where}${writes === "" ? "" : `; it had called ${writes}, and none of it is kept`}`,
    data: {
      timeoutMs: run.timeoutMs,
      ...(run.place ?? {}),
      ...(writes === "" ? {} : { calls: written }),
    },
  };
}

/**
 * Where the engine stopped the script (its interrupt's stack), for a limit's failure to name: the
 * engine records the place of the script's last call, so a loop of plain arithmetic reads as the last
 * call before it.
 */
export function notePlace(run: Run, error: QuickJSHandle): void {
  if (!run.interrupted && !engineState.growthRefused) return;
  try {
    const stack = run.context.getProp(error, "stack");
    const text = run.context.typeof(stack) === "string" ? run.context.getString(stack) : undefined;
    stack.dispose();
    const place = positionOf(run.script, text?.slice(0, 4000));
    if (place !== undefined) run.place = place;
  } catch {
    // An engine that cannot say where it was leaves the failure without a place.
  }
}

/** What a script error tells the model: its code, message, place and the offending line. */
export function scriptFailure(
  run: Run,
  thrown: SandboxFailure & { name?: string; stack?: string },
): SandboxFailure {
  if (engineState.growthRefused || (thrown.name === "InternalError" && thrown.message === "out of memory"))
    return memoryFailure(run);
  // The script's own failure: a host's code it cannot give, every part cut to its bound.
  const error = {
    ...boundScriptFailure(thrown),
    ...(typeof thrown.name === "string" ? { name: thrown.name.slice(0, 100) } : {}),
  };
  const position = positionOf(
    run.script,
    typeof thrown.stack === "string" ? thrown.stack.slice(0, 4000) : undefined,
  );
  const data =
    typeof error.data === "object" && error.data !== null && !Array.isArray(error.data)
      ? (error.data as Record<string, unknown>)
      : error.data === undefined
        ? {}
        : { value: error.data };
  const described =
    error.name !== undefined && error.name !== "DocScriptError" && error.name !== "Error"
      ? `${error.name}: ${error.message}`
      : error.message;
  const located =
    position === undefined ? described : `${described} (line ${position.line}, column ${position.column})`;
  const merged = position === undefined ? data : { ...data, ...position };
  return Object.keys(merged).length === 0
    ? { code: error.code, message: located }
    : { code: error.code, message: located, data: merged };
}
