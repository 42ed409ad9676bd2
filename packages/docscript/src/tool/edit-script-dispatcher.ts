/**
 * The edit-script engine as each sandbox worker loads it (ADR 0464): the bindings of the script API,
 * each answered by the host. A sync binding asks through the sandbox's sync host call, `materialize`
 * through an async one, and the script's end asks the host for the plan. The worker holds no document:
 * the run's session (`run-session.ts`) lives on the host, which answers only the running run's calls.
 */
import type { SandboxDispatcher, SandboxHost, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import { scriptSurface } from "./script-api.ts";

export const surface = scriptSurface;

/** The host call a binding call becomes: its binding, method and arguments, as the script gave them. */
export interface ScriptCall {
  readonly binding: string;
  readonly method: string;
  readonly args: readonly unknown[];
}

export function createDispatcher(_input: unknown, host: SandboxHost): SandboxDispatcher {
  return {
    call(binding, method, args) {
      return host.callSync("script", { binding, method, args } satisfies ScriptCall);
    },
    callAsync(binding, method, args) {
      return host.call("script", { binding, method, args } satisfies ScriptCall);
    },
    finish(outcome: ScriptOutcome) {
      return host.call("finish", outcome);
    },
  };
}
