/**
 * The worker a sandbox pool runs scripts in. It loads the dispatcher module and the QuickJS engine
 * (compiled to WebAssembly) once; for each run it makes a fresh engine runtime and context under the
 * run's memory ceiling, stack bound and deadline, installs the bindings and runs the script there. The
 * engine's only way out is the host functions installed for the run: each takes and returns text, and
 * reaches the dispatcher only through the run's gate (`run-gate.ts`), which checks the run's capability.
 * The worker is for preemption and crash isolation; the engine is the boundary.
 */

import v8 from "node:v8";
import { parentPort, workerData } from "node:worker_threads";
import variant from "@jitl/quickjs-ng-wasmfile-release-sync";
import {
  DefaultIntrinsics,
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSHandle,
  type QuickJSSyncVariant,
  type QuickJSWASMModule,
} from "quickjs-emscripten-core";
import { createRunGate, toFailure } from "./run-gate.ts";
import { createHostCalls } from "./sandbox-host-calls.ts";
import { install } from "./sandbox-install.ts";
import type {
  HostToWorker,
  SandboxDispatcher,
  SandboxDispatcherModule,
  SandboxFailure,
  ScriptOutcome,
  SyncChannel,
  WorkerToHost,
} from "./sandbox-protocol.ts";
import {
  engineState,
  memoryFailure,
  notePlace,
  positionOf,
  type Run,
  scriptFailure,
  scriptFile,
  scriptPrefix,
  timeoutFailure,
} from "./sandbox-run.ts";
import { scriptBridgeSource } from "./script-bridge.ts";

/** The engine's own stack bound: deep enough for ~1,400 plain frames, well inside the worker's 4 MB stack. */
const engineStackBytes = 256 * 1024;

/** The engine's own footprint (code, stack, static data) on top of what a script may allocate. */
const engineBaseBytes = 16 * 1024 * 1024;
const wasmPageBytes = 64 * 1024;

const port = parentPort!;
const { dispatcherModule, memoryLimitMb, sync } = workerData as {
  dispatcherModule: string;
  memoryLimitMb: number;
  sync: SyncChannel;
};
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
const grow = WebAssembly.Memory.prototype.grow;
Object.defineProperty(engineMemory, "grow", {
  value(delta: number): number {
    try {
      return Reflect.apply(grow, engineMemory, [delta]) as number;
    } catch (error) {
      engineState.growthRefused = true;
      throw error;
    }
  },
});
let loaded: SandboxDispatcherModule;
let engine: QuickJSWASMModule;
let active: Run | undefined;

function send(message: WorkerToHost): void {
  port.postMessage(message);
}

const calls = createHostCalls(send, sync, () => active);

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
  if (engineState.growthRefused) return void end(run, memoryFailure(run));
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

/** The engine itself failed (a trap in its code): the run fails and this worker is replaced. */
function engineFailed(run: Run, error: unknown): void {
  void end(run, {
    code: "sandbox_crashed",
    message: `the script engine failed: ${error instanceof Error ? error.name : "unknown error"}`,
  });
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
  calls.closeRoute(run);
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

/**
 * What this worker holds between runs: the engine's WebAssembly memory (it never shrinks: it stays at
 * the largest run's need) and the worker's V8 heap. The pool replaces a worker past its bound.
 */
function memoryBytes(): number {
  return engineMemory.buffer.byteLength + v8.getHeapStatistics().used_heap_size;
}

function finishRun(
  run: Run,
  result: { ok: boolean; value?: unknown; error?: SandboxFailure },
  retire: boolean,
): void {
  const message = {
    type: "result",
    runId: run.runId,
    capability: run.capability,
    logs: run.logs,
    memoryBytes: memoryBytes(),
  } as const;
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

async function startRun(message: Extract<HostToWorker, { type: "run" }>): Promise<void> {
  const { runId, capability } = message;
  let dispatcher: SandboxDispatcher;
  try {
    dispatcher = await loaded.createDispatcher(message.input, calls.hostFor(runId, capability));
  } catch (error) {
    message.hostChannel?.port.close();
    send({
      type: "result",
      runId,
      capability,
      ok: false,
      error: toFailure(error, "run_failed"),
      logs: [],
      memoryBytes: memoryBytes(),
    });
    return;
  }
  const runtime = engine.newRuntime();
  runtime.setMaxStackSize(engineStackBytes);
  engineState.growthRefused = false;
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
    route: calls.routeOf(message, runId, capability),
    hostGone: false,
  };
  runtime.setInterruptHandler(() => {
    if (engineState.growthRefused || run.hostGone) return true;
    if (performance.now() < run.deadline) return false;
    run.interrupted = true;
    return true;
  });
  active = run;
  let api: QuickJSHandle;
  let main: QuickJSHandle;
  try {
    api = install(run, { surface: loaded.surface, active: () => active, send, settle });
  } catch (error) {
    return engineFailed(run, error);
  }
  const compiled = context.evalCode(`${scriptPrefix}${message.script}\n})`, scriptFile);
  if (compiled.error !== undefined) return compileFailed(run, compiled.error, api);
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
 * A script that does not compile: started and ended at once, its engine disposed, and the failure
 * answered with the line and column the engine names.
 */
async function compileFailed(run: Run, compileError: QuickJSHandle, api: QuickJSHandle): Promise<void> {
  const { context, runtime } = run;
  const dumped = context.dump(compileError) as { name?: unknown; message?: unknown; stack?: unknown };
  compileError.dispose();
  api.dispose();
  const position = positionOf(run.script, typeof dumped.stack === "string" ? dumped.stack : undefined);
  const text = typeof dumped.message === "string" ? dumped.message : "the script does not compile";
  run.outcome = {
    ok: false,
    error: {
      code: "syntax_error",
      message: text,
      ...(typeof dumped.stack === "string" ? { stack: dumped.stack } : {}),
    },
  };
  send({ type: "started", runId: run.runId, capability: run.capability });
  run.over = true;
  run.gate.end();
  try {
    context.dispose();
    runtime.dispose();
  } catch {
    // Disposed with the worker if not here.
  }
  if (active === run) active = undefined;
  calls.closeRoute(run);
  send({ type: "script-ended", runId: run.runId, capability: run.capability });
  const error: SandboxFailure = {
    code: "syntax_error",
    message: position === undefined ? text : `${text} (line ${position.line}, column ${position.column})`,
    ...(position === undefined ? {} : { data: position }),
  };
  try {
    await run.dispatcher.finish({ ok: false, error });
  } catch {
    // The dispatcher refuses a failed script; the syntax error is the answer.
  }
  return finishRun(run, { ok: false, error }, false);
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
    calls.answer(message);
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
