/** A sandbox pool whose workers run the edit-script engine: what `runEditScript` runs on. */
import {
  createSandboxPool,
  type SandboxPool,
  type SandboxPoolOptions,
} from "../sandbox/create-sandbox-pool.ts";

const dispatcherModule = new URL(
  import.meta.url.endsWith(".ts") ? "./edit-script-dispatcher.ts" : "./edit-script-dispatcher.js",
  import.meta.url,
);

export type EditScriptPoolOptions = Omit<SandboxPoolOptions, "dispatcherModule">;

export function createEditScriptPool(options: EditScriptPoolOptions = {}): SandboxPool {
  return createSandboxPool({ ...options, dispatcherModule });
}
