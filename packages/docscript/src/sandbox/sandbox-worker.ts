/**
 * The worker a sandbox pool runs scripts in. It loads the dispatcher module and the QuickJS engine
 * (compiled to WebAssembly) once; for each run it makes a fresh engine runtime and context under the
 * run's memory ceiling, stack bound and deadline, installs the bindings and runs the script there. The
 * engine's only way out is the host functions installed for the run: each takes and returns text, and
 * reaches the dispatcher only through the run's gate (`run-gate.ts`), which checks the run's capability.
 * The worker is for preemption and crash isolation; the engine is the boundary.
 */

import { parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import variant from "@jitl/quickjs-ng-wasmfile-release-sync";
import {
  DefaultIntrinsics,
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSSyncVariant,
  type QuickJSWASMModule,
} from "quickjs-emscripten-core";
import { createRunGate, maxArgumentsChars, type RunGate, toFailure } from "./run-gate.ts";
import type {
  HostToWorker,
  SandboxDispatcher,
  SandboxDispatcherModule,
  SandboxFailure,
  SandboxHost,
  SandboxLog,
  ScriptOutcome,
  ScriptPosition,
  SyncAnswer,
  SyncChannel,
  WorkerToHost,
} from "./sandbox-protocol.ts";
import { removedGlobals, scriptBridgeSource } from "./script-bridge.ts";
import { boundScriptFailure, maxLogCrossingChars, maxOutcomeChars } from "./script-failure-bounds.ts";

const maxLogLines = 200;
/** A string the engine holds that is longer than a crossing takes: only its length crossed. */
type TooLong = { readonly tooLong: number };
const maxLogLineLength = 2000;
/** The engine's own stack bound: deep enough for ~1,400 plain frames, well inside the worker's 4 MB stack. */
const engineStackBytes = 256 * 1024;
/** The script's first line follows this one: reported line N is the script's line N - 1. */
const scriptPrefix = '(async function editScript() {"use strict";\n';
const scriptFile = "edit-script.js";

interface Run {
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

/** The engine's own footprint (code, stack, static data) on top of what a script may allocate. */
const engineBaseBytes = 16 * 1024 * 1024;
const wasmPageBytes = 64 * 1024;

const port = parentPort!;
const { dispatcherModule, memoryLimitMb, sync } = workerData as {
  dispatcherModule: string;
  memoryLimitMb: number;
  sync: SyncChannel;
};
const syncSignal = new Int32Array(sync.signal);
/**
 * The engine's whole memory, capped: QuickJS's own allocation limit cannot see allocation sizes in this
 * build, so the ceiling is the WebAssembly memory's maximum. A refused growth fails the engine's
 * allocation (the script sees an out-of-memory error) and marks the run, which ends as `memory_limit`
 * even if the script caught the error; the worker is then replaced, which returns the memory.
 */
const engineMemory = new WebAssembly.Memory({
  initial: engineBaseBytes / wasmPageBytes,
  maximum: Math.ceil((engineBaseBytes + memoryLimitMb * 1024 * 1024) / wasmPageBytes),
});
let growthRefused = false;
const grow = WebAssembly.Memory.prototype.grow;
Object.defineProperty(engineMemory, "grow", {
  value(delta: number): number {
    try {
      return Reflect.apply(grow, engineMemory, [delta]) as number;
    } catch (error) {
      growthRefused = true;
      throw error;
    }
  },
});
let loaded: SandboxDispatcherModule;
let engine: QuickJSWASMModule;
let active: Run | undefined;
let nextCallId = 1;
const hostCalls = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();

function send(message: WorkerToHost): void {
  port.postMessage(message);
}

/** A failure the host answered, as an error the gate hands to the script with its code and data. */
function hostFailure(error: SandboxFailure | undefined): Error {
  return Object.assign(
    new Error(error?.message ?? "host call failed"),
    error ?? { code: "host_call_failed" },
  );
}

/** Where a run's sync calls go: its own host channel (a host worker), else the pool's thread. */
interface SyncRoute {
  readonly port: import("node:worker_threads").MessagePort;
  readonly signal: Int32Array;
  /** The pool's thread reads its calls as messages of the worker; a host channel's as its own. */
  post(callId: number, method: string, payload: unknown): void;
}

/**
 * Asks the host and blocks until it answers on the sync channel, or until the script's deadline: then
 * the call fails `timeout` (the engine's interrupt ends the script right after). Answers of earlier
 * calls that arrive late are dropped. A host channel whose host has gone fails the call and the run.
 */
function callHostSync(runId: number, capability: string, method: string, payload: unknown): unknown {
  const run = active;
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

/** A script error's place in the script's own coordinates, read from the engine's description. */
function positionOf(script: string, stack: string | undefined): ScriptPosition | undefined {
  if (stack === undefined) return undefined;
  const match = /edit-script\.js:(\d+)(?::(\d+))?/.exec(stack);
  if (match === null) return undefined;
  const line = Number(match[1]) - 1;
  const column = match[2] === undefined ? 1 : Number(match[2]);
  const lines = script.split("\n");
  if (line < 1 || line > lines.length) return undefined;
  return { line, column, sourceLine: lines[line - 1]!.slice(0, 300) };
}

/** Route for every host function of the engine: the run it names must be the active, live run. */
function gateOf(capability: string): RunGate | undefined {
  const run = active;
  if (run === undefined || run.capability !== capability || run.over) return undefined;
  return run.gate;
}

const refusedByCapability = JSON.stringify({
  ok: false,
  error: { code: "capability_refused", message: "the call does not belong to the active run" },
});

function install(run: Run): QuickJSHandle {
  const { context, capability } = run;
  const hostObject = context.newObject();
  // A string's length is read inside the engine: text past the bound is never copied out to the host.
  const text = (handle: QuickJSHandle | undefined, most: number): string | undefined | TooLong => {
    if (handle === undefined || context.typeof(handle) !== "string") return undefined;
    const lengthHandle = context.getProp(handle, "length");
    const length =
      context.typeof(lengthHandle) === "number" ? context.getNumber(lengthHandle) : Number.POSITIVE_INFINITY;
    lengthHandle.dispose();
    if (length > most) return { tooLong: length };
    return context.getString(handle);
  };
  const define = (
    name: string,
    most: number,
    implementation: (argument: string | undefined | TooLong) => string | undefined,
  ) => {
    const fn = context.newFunction(name, (argument) => {
      const answer = implementation(text(argument, most));
      return answer === undefined ? context.undefined : context.newString(answer);
    });
    context.setProp(hostObject, name, fn);
    fn.dispose();
  };
  for (const [binding, methods] of Object.entries(loaded.surface)) {
    for (const [method, kind] of Object.entries(methods)) {
      define(`call:${binding}.${method}`, maxArgumentsChars, (argumentsText) => {
        const gate = gateOf(capability);
        if (gate === undefined) return refusedByCapability;
        if (typeof argumentsText === "object")
          return JSON.stringify({
            ok: false,
            error: {
              code: "arguments_too_large",
              message: `the call's arguments are ${argumentsText.tooLong} characters as JSON; at most ${maxArgumentsChars}`,
            },
          });
        if (kind === "sync") return gate.call(capability, binding, method, argumentsText);
        return gate.callAsync(capability, binding, method, argumentsText, (answer) => settle(run, answer));
      });
    }
  }
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    define(`log:${level}`, maxLogCrossingChars, (line) => {
      if (gateOf(capability) === undefined || line === undefined) return undefined;
      if (run.logs.length < maxLogLines) {
        const entry: SandboxLog = {
          level,
          text:
            typeof line === "object"
              ? `[a line of ${line.tooLong} characters, not copied]`
              : line.slice(0, maxLogLineLength),
        };
        run.logs.push(entry);
        send({ type: "log", runId: run.runId, capability, line: entry });
      }
      return undefined;
    });
  }
  define("finish", maxOutcomeChars, (outcomeText) => {
    if (gateOf(capability) === undefined || run.outcome !== undefined || outcomeText === undefined)
      return undefined;
    if (typeof outcomeText === "object") {
      run.outcome = {
        ok: false,
        error: {
          code: "script_error",
          message: `the script's failure was ${outcomeText.tooLong} characters as JSON; at most ${maxOutcomeChars} are read`,
        },
      };
      return undefined;
    }
    try {
      run.outcome = JSON.parse(outcomeText) as ScriptOutcome;
    } catch {
      run.outcome = { ok: false, error: { code: "script_error", message: "the script ended unreadably" } };
    }
    return undefined;
  });
  const installer = context.unwrapResult(context.evalCode(scriptBridgeSource, "bridge.js"));
  const surfaceText = context.newString(JSON.stringify(loaded.surface));
  const removedText = context.newString(JSON.stringify(removedGlobals));
  const api = context.unwrapResult(
    context.callFunction(installer, context.undefined, hostObject, surfaceText, removedText),
  );
  for (const handle of [installer, surfaceText, removedText, hostObject]) handle.dispose();
  run.settle = context.getProp(api, "settle");
  run.audit = context.getProp(api, "audit");
  return api;
}

/** Hands an async call's answer to the script, then lets the script go on. */
function settle(run: Run, answer: string): void {
  if (run.over || run.settle === undefined) return;
  const text = run.context.newString(answer);
  const result = run.context.callFunction(run.settle, run.context.undefined, text);
  text.dispose();
  if (result.error !== undefined) result.error.dispose();
  else result.value.dispose();
  pump(run);
}

/** Runs the engine's pending jobs; ends the run when the script has ended or can never go on. */
function pump(run: Run): void {
  if (run.over) return;
  try {
    const jobs = run.runtime.executePendingJobs(-1);
    if (jobs.error !== undefined) {
      notePlace(run, jobs.error);
      jobs.error.dispose();
      if (!run.interrupted && run.outcome === undefined)
        run.outcome = {
          ok: false,
          error: { code: "script_error", message: "the engine stopped the script" },
        };
    }
  } catch (error) {
    engineFailed(run, error);
    return;
  }
  if (growthRefused) return void end(run, memoryFailure(run));
  if (run.hostGone)
    return void end(run, { code: "sandbox_crashed", message: "the run's host ended before the run did" });
  if (run.interrupted) return void end(run, timeoutFailure(run));
  if (run.outcome !== undefined) return void end(run);
  if (run.gate.inFlight === 0) {
    run.outcome = {
      ok: false,
      error: {
        code: "script_error",
        message: "the script waits on a promise that nothing will ever settle",
      },
    };
    return void end(run);
  }
}

function memoryFailure(run: Run): SandboxFailure {
  return { code: "memory_limit", message: `the script exceeded the ${run.memoryLimitMb} MB heap ceiling` };
}

function timeoutFailure(run: Run): SandboxFailure {
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
function notePlace(run: Run, error: QuickJSHandle): void {
  if (!run.interrupted && !growthRefused) return;
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

/** The engine itself failed (a trap in its code): the run fails and this worker is replaced. */
function engineFailed(run: Run, error: unknown): void {
  void end(run, {
    code: "sandbox_crashed",
    message: `the script engine failed: ${error instanceof Error ? error.name : "unknown error"}`,
  });
}

/** What a script error tells the model: its code, message, place and the offending line. */
function scriptFailure(run: Run, thrown: SandboxFailure & { name?: string; stack?: string }): SandboxFailure {
  if (growthRefused || (thrown.name === "InternalError" && thrown.message === "out of memory"))
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

async function end(run: Run, limit?: SandboxFailure): Promise<void> {
  if (run.over) return;
  run.over = true;
  clearTimeout(run.deadlineTimer);
  run.gate.end();
  let outcome: ScriptOutcome | undefined = run.outcome;
  let unobserved: string | undefined;
  if (limit === undefined && outcome?.ok === true && run.audit !== undefined) {
    try {
      const ids = run.context.newString(JSON.stringify(run.gate.rejectedCallIds));
      const audited = run.context.callFunction(run.audit, run.context.undefined, ids);
      ids.dispose();
      if (audited.error === undefined) {
        const found = JSON.parse(run.context.getString(audited.value)) as { message: string } | null;
        audited.value.dispose();
        if (found !== null) unobserved = found.message;
      } else audited.error.dispose();
    } catch {
      // An engine that cannot answer the audit is disposed below all the same.
    }
  }
  let retire = limit !== undefined;
  try {
    run.settle?.dispose();
    run.audit?.dispose();
    run.context.dispose();
    run.runtime.dispose();
  } catch {
    retire = true;
  }
  if (active === run) active = undefined;
  closeRoute(run);
  send({ type: "script-ended", runId: run.runId, capability: run.capability });
  if (limit !== undefined) return finishRun(run, { ok: false, error: limit }, true);
  outcome ??= { ok: false, error: { code: "script_error", message: "the script ended without an outcome" } };
  if (outcome.ok && unobserved !== undefined) {
    outcome = {
      ok: false,
      error: {
        code: "unhandled_rejection",
        message: `a promise the script did not handle was rejected: ${unobserved.slice(0, 2000)}`,
      },
    };
  } else if (!outcome.ok) {
    const failure = scriptFailure(run, outcome.error);
    if (failure.code === "memory_limit") return finishRun(run, { ok: false, error: failure }, true);
    outcome = { ok: false, error: failure };
  }
  try {
    const value = await run.dispatcher.finish(outcome);
    finishRun(run, { ok: true, value }, retire);
  } catch (error) {
    // A failed script stays the answer (its code, place and data); the dispatcher's refusal of it adds nothing.
    const failure = outcome.ok ? toFailure(error, "run_failed") : outcome.error;
    finishRun(run, { ok: false, error: failure }, retire);
  }
}

function finishRun(
  run: Run,
  result: { ok: boolean; value?: unknown; error?: SandboxFailure },
  retire: boolean,
): void {
  const message = { type: "result", runId: run.runId, capability: run.capability, logs: run.logs } as const;
  try {
    send({ ...message, ...result, ...(retire ? { retire: true } : {}) });
  } catch (error) {
    // A result that cannot cross to the host fails the run at once, saying so, never as a timeout.
    send({
      ...message,
      ok: false,
      error: {
        code: "run_failed",
        message: `the run's result cannot cross to the host: ${(error as Error).message}`,
      },
      ...(retire ? { retire: true } : {}),
    });
  }
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

async function startRun(message: Extract<HostToWorker, { type: "run" }>): Promise<void> {
  const { runId, capability } = message;
  let dispatcher: SandboxDispatcher;
  try {
    dispatcher = await loaded.createDispatcher(message.input, hostFor(runId, capability));
  } catch (error) {
    message.hostChannel?.port.close();
    send({ type: "result", runId, capability, ok: false, error: toFailure(error, "run_failed"), logs: [] });
    return;
  }
  const runtime = engine.newRuntime();
  runtime.setMaxStackSize(engineStackBytes);
  growthRefused = false;
  // import() of anything is refused; the engine makes the error in the script's own realm.
  runtime.setModuleLoader(() => ({ error: new Error("import() is not available in an edit script") }));
  const context = runtime.newContext({ intrinsics: { ...DefaultIntrinsics, TypedArrays: false } });
  const run: Run = {
    runId,
    capability,
    script: message.script,
    timeoutMs: message.timeoutMs,
    memoryLimitMb: message.memoryLimitMb,
    logs: [],
    dispatcher,
    gate: createRunGate(capability, loaded.surface, dispatcher),
    runtime,
    context,
    deadline: Number.POSITIVE_INFINITY,
    interrupted: false,
    over: false,
    route: routeOf(message, runId, capability),
    hostGone: false,
  };
  runtime.setInterruptHandler(() => {
    if (growthRefused || run.hostGone) return true;
    if (performance.now() < run.deadline) return false;
    run.interrupted = true;
    return true;
  });
  active = run;
  let api: QuickJSHandle;
  let main: QuickJSHandle;
  try {
    api = install(run);
  } catch (error) {
    return engineFailed(run, error);
  }
  const compiled = context.evalCode(`${scriptPrefix}${message.script}\n})`, scriptFile);
  if (compiled.error !== undefined) {
    const dumped = context.dump(compiled.error) as { name?: unknown; message?: unknown; stack?: unknown };
    compiled.error.dispose();
    api.dispose();
    const position = positionOf(message.script, typeof dumped.stack === "string" ? dumped.stack : undefined);
    const text = typeof dumped.message === "string" ? dumped.message : "the script does not compile";
    run.outcome = {
      ok: false,
      error: {
        code: "syntax_error",
        message: text,
        ...(typeof dumped.stack === "string" ? { stack: dumped.stack } : {}),
      },
    };
    send({ type: "started", runId, capability });
    run.over = true;
    run.gate.end();
    try {
      context.dispose();
      runtime.dispose();
    } catch {
      // Disposed with the worker if not here.
    }
    if (active === run) active = undefined;
    closeRoute(run);
    send({ type: "script-ended", runId, capability });
    const error: SandboxFailure = {
      code: "syntax_error",
      message: position === undefined ? text : `${text} (line ${position.line}, column ${position.column})`,
      ...(position === undefined ? {} : { data: position }),
    };
    try {
      await dispatcher.finish({ ok: false, error });
    } catch {
      // The dispatcher refuses a failed script; the syntax error is the answer.
    }
    return finishRun(run, { ok: false, error }, false);
  }
  main = compiled.value;
  send({ type: "started", runId, capability });
  run.deadline = performance.now() + message.timeoutMs;
  run.deadlineTimer = setTimeout(() => {
    run.interrupted = true;
    void end(run, timeoutFailure(run));
  }, message.timeoutMs);
  try {
    const start = context.getProp(api, "start");
    const started = context.callFunction(start, context.undefined, main);
    start.dispose();
    main.dispose();
    api.dispose();
    if (started.error !== undefined) {
      notePlace(run, started.error);
      started.error.dispose();
      if (!run.interrupted && run.outcome === undefined)
        run.outcome = {
          ok: false,
          error: { code: "script_error", message: "the engine stopped the script" },
        };
    } else started.value.dispose();
  } catch (error) {
    return engineFailed(run, error);
  }
  pump(run);
}

/**
 * WebAssembly compiles each engine function lazily, on its first call: a first script in a fresh worker
 * would pay for it inside its time limit. One throwaway run of the bridge and a small script at boot
 * pays it before the worker is ready.
 */
function warmUp(): void {
  const runtime = engine.newRuntime();
  runtime.setMaxStackSize(engineStackBytes);
  const context = runtime.newContext({ intrinsics: { ...DefaultIntrinsics, TypedArrays: false } });
  try {
    const installer = context.unwrapResult(context.evalCode(scriptBridgeSource, "bridge.js"));
    installer.dispose();
    const warm = context.evalCode(
      `(async () => { const rows = []; for (let index = 0; index < 2000; index++) rows.push({ id: "r" + index, payload: { n: index, text: String(index) } });
        const text = JSON.stringify(rows); const back = JSON.parse(text); await Promise.resolve(back.length);
        return back.filter((row) => row.payload.n % 2).map((row) => row.id).sort().join(",").length; })()`,
      scriptFile,
    );
    if (warm.error !== undefined) warm.error.dispose();
    else warm.value.dispose();
    runtime.executePendingJobs(-1);
  } finally {
    context.dispose();
    runtime.dispose();
  }
}

port.on("message", (message: HostToWorker) => {
  if (message.type === "run") {
    void startRun(message);
  } else if (message.type === "host-answer") {
    const waiting = hostCalls.get(message.callId);
    if (waiting === undefined) return;
    hostCalls.delete(message.callId);
    if (message.ok) waiting.resolve(message.value);
    else waiting.reject(hostFailure(message.error));
  }
});

try {
  // The variant's typings describe its CommonJS shape; as an ES module its default export is the variant.
  engine = await newQuickJSWASMModuleFromVariant(
    newVariant(variant as unknown as QuickJSSyncVariant, { wasmMemory: engineMemory }),
  );
  const imported = (await import(dispatcherModule)) as {
    default?: SandboxDispatcherModule;
  } & SandboxDispatcherModule;
  loaded = imported.default ?? imported;
  if (typeof loaded.createDispatcher !== "function" || typeof loaded.surface !== "object") {
    throw new Error(`${dispatcherModule} exports no surface and createDispatcher`);
  }
  warmUp();
  send({ type: "ready" });
} catch (error) {
  send({ type: "boot-failed", message: error instanceof Error ? error.message : String(error) });
}
