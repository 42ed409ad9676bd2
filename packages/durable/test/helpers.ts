/** Test helpers: a real SQLite store in a scratch directory, and a client that applies frames by id. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DurableStore, Frame } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";

export interface TempStore {
  readonly store: DurableStore;
  readonly path: string;
  reopen(): DurableStore;
  cleanup(): Promise<void>;
}

export function tempSqliteStore(): TempStore {
  const directory = mkdtempSync(join(tmpdir(), "durable-test-"));
  const path = join(directory, "runs.sqlite");
  const opened = [createSqliteStore({ path })];
  return {
    store: opened[0] as DurableStore,
    path,
    reopen() {
      const store = createSqliteStore({ path });
      opened.push(store);
      return store;
    },
    async cleanup() {
      for (const store of opened) await store.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** What a UI does with tool_call frames: one card per id, updated in place. */
export function applyToolCards(frames: readonly Frame[]): Map<string, Record<string, unknown>> {
  const cards = new Map<string, Record<string, unknown>>();
  for (const frame of frames) {
    if (frame.type !== "tool_call") continue;
    const data = frame.data as Record<string, unknown>;
    cards.set(String(data.id), { ...cards.get(String(data.id)), ...data });
  }
  return cards;
}
