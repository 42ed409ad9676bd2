/** The console's live module status: the catalogue re-read while someone watches. */
import type { Logger } from "@tackle/core";
import type { ModuleInfo, ToolSource } from "../../tool-source/tool-source.ts";

export interface StatusFeed {
  read(): Promise<readonly ModuleInfo[]>;
  subscribe(listener: (modules: readonly ModuleInfo[]) => void): () => void;
  close(): void;
}

/** Re-reads the catalogue while someone is watching, and tells the watchers. */
export function createStatusFeed(source: ToolSource, intervalMs: number, logger: Logger): StatusFeed {
  const listeners = new Set<(modules: readonly ModuleInfo[]) => void>();
  let timer: NodeJS.Timeout | undefined;
  let reading: Promise<readonly ModuleInfo[]> | undefined;
  const read = () => {
    reading ??= source.catalogue().finally(() => {
      reading = undefined;
    });
    return reading;
  };
  const tick = async () => {
    try {
      const modules = await read();
      for (const listener of listeners) listener(modules);
    } catch (error) {
      logger.warn("console could not read module status", { error: (error as Error).message });
    }
  };
  return {
    read,
    subscribe(listener) {
      listeners.add(listener);
      timer ??= setInterval(() => void tick(), intervalMs);
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0 && timer !== undefined) {
          clearInterval(timer);
          timer = undefined;
        }
      };
    },
    close() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      listeners.clear();
    },
  };
}
