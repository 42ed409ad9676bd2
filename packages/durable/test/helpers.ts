/** Test helpers: a real SQLite store in a scratch directory, and a client that applies frames by id. */
import assert from "node:assert/strict";
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

/** The raw SSE text of `base` + `path`, read until `done` holds. */
export async function sseAt(base: string, path: string, done: (text: string) => boolean): Promise<string> {
  const controller = new AbortController();
  const response = await fetch(`${base}${path}`, { signal: controller.signal });
  assert.equal(response.status, 200);
  const decoder = new TextDecoder();
  let text = "";
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (done(text)) break;
    }
  } finally {
    controller.abort();
  }
  return text;
}
