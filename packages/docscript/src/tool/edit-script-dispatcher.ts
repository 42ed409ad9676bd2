/**
 * The edit-script engine as each sandbox worker loads it (ADR 0464): the bindings of the script API,
 * each answered by the host. A sync binding asks through the sandbox's sync host call, `materialize`
 * through an async one, and the script's end asks the host for the plan. The worker holds no document:
 * the run's session (`run-session.ts`) lives on the host, which answers only the running run's calls.
 */
import type { SandboxDispatcher, SandboxHost, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import { scriptSurface } from "./script-api.ts";

export const surface = scriptSurface;

/** File reads and uploads one run may have in flight at once. */
export const maxHookCallsPerRun = 4;

/** The host call a binding call becomes: its binding, method and arguments, as the script gave them. */
export interface ScriptCall {
  readonly binding: string;
  readonly method: string;
  readonly args: readonly unknown[];
}

export function createDispatcher(_input: unknown, host: SandboxHost): SandboxDispatcher {
  /** `materialize` calls of this run in flight: each is a file read on the host. */
  let inFlight = 0;
  return {
    call(binding, method, args) {
      return host.callSync("script", { binding, method, args } satisfies ScriptCall);
    },
    callAsync(binding, method, args) {
      // Past the run's cap a call is refused here, in the sandbox worker, so thousands of un-awaited
      // reads never reach the tool's thread (the host checks the same cap, and its own across runs).
      if (inFlight >= maxHookCallsPerRun)
        throw Object.assign(
          new Error(
            `at most ${maxHookCallsPerRun} file reads or uploads of one run are in flight at once: await some first`,
          ),
          { code: "too_many_hook_calls" },
        );
      inFlight++;
      const answer = host.call("script", { binding, method, args } satisfies ScriptCall);
      void answer.then(
        () => inFlight--,
        () => inFlight--,
      );
      return answer;
    },
    finish(outcome: ScriptOutcome) {
      return host.call("finish", outcome);
    },
  };
}
