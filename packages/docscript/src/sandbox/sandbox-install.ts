/**
 * The host functions a run's engine gets: one per binding method, the console's levels and \`finish\`.
 * Each takes and returns text, reads a string's length inside the engine before copying it out, and
 * reaches the dispatcher only through the run's gate, for the active, live run.
 */
import type { QuickJSHandle } from "quickjs-emscripten-core";
import { maxArgumentsChars, type RunGate } from "./run-gate.ts";
import type { SandboxLog, SandboxSurface, ScriptOutcome, WorkerToHost } from "./sandbox-protocol.ts";
import type { Run } from "./sandbox-run.ts";
import { removedGlobals, scriptBridgeSource } from "./script-bridge.ts";
import { maxLogCrossingChars, maxOutcomeChars } from "./script-failure-bounds.ts";

const maxLogLines = 200;
/** A string the engine holds that is longer than a crossing takes: only its length crossed. */
type TooLong = { readonly tooLong: number };
const maxLogLineLength = 2000;

/** What \`install\` needs of the worker. */
export interface InstallHost {
  readonly surface: SandboxSurface;
  active(): Run | undefined;
  send(message: WorkerToHost): void;
  /** Hands an async call's answer to the script. */
  settle(run: Run, answer: string): void;
}

/** Route for every host function of the engine: the run it names must be the active, live run. */
function gateOf(host: InstallHost, capability: string): RunGate | undefined {
  const run = host.active();
  if (run === undefined || run.capability !== capability || run.over) return undefined;
  return run.gate;
}

const refusedByCapability = JSON.stringify({
  ok: false,
  error: { code: "capability_refused", message: "the call does not belong to the active run" },
});

export function install(run: Run, host: InstallHost): QuickJSHandle {
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
  for (const [binding, methods] of Object.entries(host.surface)) {
    for (const [method, kind] of Object.entries(methods)) {
      define(`call:${binding}.${method}`, maxArgumentsChars, (argumentsText) => {
        const gate = gateOf(host, capability);
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
        return gate.callAsync(capability, binding, method, argumentsText, (answer) =>
          host.settle(run, answer),
        );
      });
    }
  }
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    define(`log:${level}`, maxLogCrossingChars, (line) => {
      if (gateOf(host, capability) === undefined || line === undefined) return undefined;
      if (run.logs.length < maxLogLines) {
        const entry: SandboxLog = {
          level,
          text:
            typeof line === "object"
              ? `[a line of ${line.tooLong} characters, not copied]`
              : line.slice(0, maxLogLineLength),
        };
        run.logs.push(entry);
        host.send({ type: "log", runId: run.runId, capability, line: entry });
      }
      return undefined;
    });
  }
  define("finish", maxOutcomeChars, (outcomeText) => {
    if (gateOf(host, capability) === undefined || run.outcome !== undefined || outcomeText === undefined)
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
  const surfaceText = context.newString(JSON.stringify(host.surface));
  const removedText = context.newString(JSON.stringify(removedGlobals));
  const api = context.unwrapResult(
    context.callFunction(installer, context.undefined, hostObject, surfaceText, removedText),
  );
  for (const handle of [installer, surfaceText, removedText, hostObject]) handle.dispose();
  run.settle = context.getProp(api, "settle");
  run.audit = context.getProp(api, "audit");
  return api;
}
