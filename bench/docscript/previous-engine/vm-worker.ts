/**
 * THE PREVIOUS ENGINE, kept only for `bench/docscript/engines.ts` to measure beside the current one: a
 * `vm` context in the worker's own V8 realm, which the escape classes documented in ADR 0434 beat. Never
 * used by the package. Adapted only to echo each run's capability, as the pool now requires.
 *
 * The worker a sandbox pool runs scripts in. It loads the dispatcher module once, then for each run
 * builds a fresh `vm` context from a null-prototype global, installs the bridge inside it and runs the
 * script; everything between the script and the dispatcher crosses as JSON text.
 */
import vm from "node:vm";
import { parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import type {
  HostToWorker,
  SandboxDispatcher,
  SandboxDispatcherModule,
  SandboxFailure,
  SandboxLog,
  ScriptOutcome,
  WorkerToHost,
} from "../../../packages/docscript/src/sandbox/sandbox-protocol.ts";
import { removedGlobals, scriptBridgeSource } from "./vm-bridge.ts";

const maxLogLines = 200;
const maxLogLineLength = 2000;

interface BridgeApi {
  start(main: unknown): void;
  settle(text: string): void;
  describe(value: unknown): string;
  makeError(message: string): unknown;
}

interface ActiveRun {
  readonly runId: number;
  readonly capability: string;
  readonly logs: SandboxLog[];
  readonly dispatcher: SandboxDispatcher;
  api?: BridgeApi;
  inFlight: number;
  ended: boolean;
  outcome?: ScriptOutcome;
  unhandled?: SandboxFailure;
}

const port = parentPort!;
const { dispatcherModule, sync } = workerData as {
  dispatcherModule: string;
  sync: { port: import("node:worker_threads").MessagePort; signal: SharedArrayBuffer };
};
const syncSignal = new Int32Array(sync.signal);
let loaded: SandboxDispatcherModule;
let active: ActiveRun | undefined;
let nextCallId = 1;
const hostCalls = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();

function send(message: WorkerToHost): void {
  port.postMessage(message);
}

function toFailure(error: unknown, fallbackCode: string): SandboxFailure {
  if (typeof error === "object" && error !== null) {
    const record = error as { code?: unknown; message?: unknown; data?: unknown };
    const code = typeof record.code === "string" ? record.code : fallbackCode;
    const message = typeof record.message === "string" ? record.message : String(error);
    let data: unknown;
    try {
      data = record.data === undefined ? undefined : JSON.parse(JSON.stringify(record.data));
    } catch {
      data = undefined;
    }
    return data === undefined ? { code, message } : { code, message, data };
  }
  return { code: fallbackCode, message: String(error) };
}

const host = {
  /** As the sandbox's own worker does (ADR 0464), bounded by 30 s rather than the script's deadline. */
  callSync(method: string, payload: unknown): unknown {
    const callId = nextCallId++;
    const until = performance.now() + 30_000;
    Atomics.store(syncSignal, 0, 0);
    send({
      type: "host-call-sync",
      runId: current.runId,
      capability: current.capability,
      callId,
      method,
      payload,
    });
    for (;;) {
      for (let received = receiveMessageOnPort(sync.port); received !== undefined; ) {
        const answer = received.message as {
          callId: number;
          ok: boolean;
          value?: unknown;
          error?: SandboxFailure;
        };
        if (answer.callId === callId) {
          if (answer.ok) return answer.value;
          throw Object.assign(new Error(answer.error?.message ?? "host call failed"), answer.error);
        }
        received = receiveMessageOnPort(sync.port);
      }
      const remaining = until - performance.now();
      if (remaining <= 0)
        throw Object.assign(new Error(`the host did not answer ${method}`), { code: "timeout" });
      Atomics.wait(syncSignal, 0, 0, remaining);
      Atomics.store(syncSignal, 0, 0);
    }
  },
  call(method: string, payload: unknown): Promise<unknown> {
    const callId = nextCallId++;
    return new Promise((resolve, reject) => {
      hostCalls.set(callId, { resolve, reject });
      send({
        type: "host-call",
        runId: current.runId,
        capability: current.capability,
        callId,
        method,
        payload,
      });
    });
  },
};

/** The one worker function the context holds: text in, text out, and it never throws on purpose. */
function bridge(text: string): string {
  const run = active;
  try {
    if (run === undefined || run.ended)
      return JSON.stringify({ ok: false, error: { code: "run_ended", message: "the run has ended" } });
    const message = JSON.parse(String(text)) as {
      kind: string;
      binding: string;
      method: string;
      args: unknown[];
      level: SandboxLog["level"];
      text: string;
      outcome: ScriptOutcome;
    };
    switch (message.kind) {
      case "call":
        try {
          const value = run.dispatcher.call(message.binding, message.method, message.args);
          return JSON.stringify({ ok: true, value: value === undefined ? null : value });
        } catch (error) {
          return JSON.stringify({ ok: false, error: toFailure(error, "call_refused") });
        }
      case "call-async":
        return startAsyncCall(run, message.binding, message.method, message.args);
      case "console":
        if (run.logs.length < maxLogLines) {
          const line: SandboxLog = {
            level: message.level,
            text: String(message.text).slice(0, maxLogLineLength),
          };
          run.logs.push(line);
          send({ type: "log", runId: run.runId, capability: run.capability, line });
        }
        return '{"ok":true}';
      case "finish":
        run.ended = true;
        run.outcome = message.outcome;
        setImmediate(() => void complete(run));
        return '{"ok":true}';
      default:
        return JSON.stringify({
          ok: false,
          error: { code: "unknown_call", message: `unknown call ${message.kind}` },
        });
    }
  } catch (error) {
    return JSON.stringify({ ok: false, error: toFailure(error, "bridge_failed") });
  }
}

function startAsyncCall(run: ActiveRun, binding: string, method: string, args: unknown[]): string {
  if (run.dispatcher.callAsync === undefined) {
    return JSON.stringify({
      ok: false,
      error: { code: "unknown_call", message: `${binding}.${method} is not available` },
    });
  }
  const callId = nextCallId++;
  run.inFlight++;
  const settle = (answer: object) => {
    run.inFlight--;
    if (active !== run || run.api === undefined) return;
    run.api.settle(JSON.stringify({ callId, ...answer }));
  };
  run.dispatcher.callAsync(binding, method, args).then(
    (value) => settle({ ok: true, value: value === undefined ? null : value }),
    (error) => settle({ ok: false, error: toFailure(error, "call_failed") }),
  );
  return JSON.stringify({ ok: true, callId });
}

/** Waits for the script's in-flight host reads, then lets the dispatcher build the run's result. */
async function complete(run: ActiveRun): Promise<void> {
  while (run.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 1));
  // Let rejections the script left unhandled surface before the plan is built.
  await new Promise((resolve) => setImmediate(resolve));
  send({ type: "script-ended", runId: run.runId, capability: run.capability });
  let outcome: ScriptOutcome = run.outcome ?? {
    ok: false,
    error: { code: "script_error", message: "no outcome" },
  };
  if (outcome.ok && run.unhandled !== undefined) outcome = { ok: false, error: run.unhandled };
  try {
    const value = await run.dispatcher.finish(outcome);
    finishRun(run, { ok: true, value });
  } catch (error) {
    finishRun(run, { ok: false, error: toFailure(error, "run_failed") });
  }
}

function finishRun(run: ActiveRun, result: { ok: boolean; value?: unknown; error?: SandboxFailure }): void {
  if (active === run) active = undefined;
  send({ type: "result", runId: run.runId, capability: run.capability, logs: run.logs, ...result });
}

process.on("unhandledRejection", (reason) => {
  const run = active;
  if (run?.api === undefined) return;
  // The reason is the script's value: only the context's own describe() may look at it.
  const described = JSON.parse(run.api.describe(reason)) as SandboxFailure;
  run.unhandled = {
    code: "unhandled_rejection",
    message: `a promise the script did not handle was rejected: ${described.message}`,
  };
});

/** The run being prepared or run: host calls name it. */
let current = { runId: 0, capability: "" };

async function startRun(runId: number, capability: string, script: string, input: unknown): Promise<void> {
  current = { runId, capability };
  let dispatcher: SandboxDispatcher;
  try {
    dispatcher = await loaded.createDispatcher(input, host);
  } catch (error) {
    send({ type: "result", runId, capability, ok: false, error: toFailure(error, "run_failed"), logs: [] });
    return;
  }
  const run: ActiveRun = { runId, capability, logs: [], dispatcher, inFlight: 0, ended: false };
  active = run;
  const context = vm.createContext(Object.create(null), {
    codeGeneration: { strings: false, wasm: false },
    name: "docscript edit script",
  });
  const install = vm.runInContext(scriptBridgeSource, context) as (
    bridgeFunction: (text: string) => string,
    surfaceText: string,
    removedText: string,
  ) => BridgeApi;
  const api = install(bridge, JSON.stringify(loaded.surface), JSON.stringify(removedGlobals));
  run.api = api;
  let main: unknown;
  try {
    const compiled = new vm.Script(`(async function editScript() {"use strict";\n${script}\n})`, {
      filename: "edit-script.js",
      lineOffset: -1,
      importModuleDynamically: (() => {
        throw api.makeError("import() is not available in an edit script");
      }) as never,
    });
    main = compiled.runInContext(context);
  } catch (error) {
    run.ended = true;
    run.outcome = {
      ok: false,
      error: {
        code: "syntax_error",
        message: error instanceof Error ? error.message : "the script does not compile",
      },
    };
    send({ type: "started", runId, capability });
    void complete(run);
    return;
  }
  send({ type: "started", runId, capability });
  api.start(main);
}

port.on("message", (message: HostToWorker) => {
  if (message.type === "run") {
    void startRun(message.runId, message.capability, message.script, message.input);
  } else if (message.type === "host-answer") {
    const waiting = hostCalls.get(message.callId);
    if (waiting === undefined) return;
    hostCalls.delete(message.callId);
    if (message.ok) waiting.resolve(message.value);
    else
      waiting.reject(Object.assign(new Error(message.error?.message ?? "host call failed"), message.error));
  }
});

try {
  const imported = (await import(dispatcherModule)) as {
    default?: SandboxDispatcherModule;
  } & SandboxDispatcherModule;
  loaded = imported.default ?? imported;
  if (typeof loaded.createDispatcher !== "function" || typeof loaded.surface !== "object") {
    throw new Error(`${dispatcherModule} exports no surface and createDispatcher`);
  }
  send({ type: "ready" });
} catch (error) {
  send({ type: "boot-failed", message: error instanceof Error ? error.message : String(error) });
}
