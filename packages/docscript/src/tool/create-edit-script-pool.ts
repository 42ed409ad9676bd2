/** A sandbox pool whose workers run the edit-script engine: what `runEditScript` runs on. */
import {
  createSandboxPool,
  type SandboxPool,
  type SandboxPoolOptions,
} from "../sandbox/create-sandbox-pool.ts";
import { createSessionHosts, registerSessionHosts } from "./session-hosts.ts";

const dispatcherModule = new URL(
  import.meta.url.endsWith(".ts") ? "./edit-script-dispatcher.ts" : "./edit-script-dispatcher.js",
  import.meta.url,
);

export type EditScriptPoolOptions = Omit<SandboxPoolOptions, "dispatcherModule"> & {
  /** Heap ceiling (MB) of each host worker, where a document's runs do their host work (ADR 0478); 1024. */
  readonly hostMemoryLimitMb?: number;
  /** The bytes (MiB) one run's host work may retain: run document, plan, uploads (ADR 0490); 256. */
  readonly runRetainedMb?: number;
  /**
   * Loro's memory (MiB) a host worker may have grown since it opened its document before it is
   * replaced between runs (ADR 0491); 64, or a quarter of what its document took to open when more.
   */
  readonly hostRecycleAboveMb?: number;
};

/** The pool, and the host workers its runs do their host work in (ADR 0478), closed with it. */
export function createEditScriptPool(options: EditScriptPoolOptions = {}): SandboxPool {
  const { hostMemoryLimitMb, runRetainedMb, hostRecycleAboveMb, ...poolOptions } = options;
  const pool = createSandboxPool({ ...poolOptions, dispatcherModule });
  const hosts = createSessionHosts({
    warm: true,
    ...(hostMemoryLimitMb === undefined ? {} : { memoryLimitMb: hostMemoryLimitMb }),
    ...(runRetainedMb === undefined ? {} : { runRetainedMb }),
    ...(hostRecycleAboveMb === undefined ? {} : { recycleAboveMb: hostRecycleAboveMb }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const edit: SandboxPool = {
    run: (request) => pool.run(request),
    stats: () => pool.stats(),
    async close() {
      await Promise.all([hosts.close(), pool.close()]);
    },
  };
  registerSessionHosts(edit, hosts);
  return edit;
}
