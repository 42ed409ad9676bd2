/** Frames as they land: read the store from a seq, wait for a wake-up or a poll, stop once the run rests. */
import type { EventEmitter } from "node:events";
import { DurableError } from "../errors/durable-error.ts";
import type { DurableStore, Frame } from "../store/durable-store.ts";

export interface WatchOptions {
  readonly afterSeq?: number;
  readonly signal?: AbortSignal;
}

/**
 * Frames a stream reads per store call. A thread's `run_started` and `run_completed` frames carry its
 * whole state, so what a stream holds is a page of them: a replay from seq 0 of a long thread, by many
 * streams at once (a reconnect storm), held each stream's page of 500 (ADR 0122).
 */
const framesPerRead = 16;

export async function* watchFrames(
  store: DurableStore,
  landed: EventEmitter,
  pollIntervalMs: number,
  threadId: string,
  watchOptions: WatchOptions = {},
): AsyncIterable<Frame> {
  let afterSeq = watchOptions.afterSeq ?? 0;
  const signal = watchOptions.signal;
  while (signal?.aborted !== true) {
    const frames = await store.readFrames(threadId, afterSeq, framesPerRead);
    for (const frame of frames) {
      afterSeq = frame.seq;
      yield frame;
    }
    if (frames.length > 0) continue;
    const run = await store.getRun(threadId);
    if (run === undefined) throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
    if (run.status !== "running") {
      // The status and the last frames land in one commit: one more read catches any straggler.
      const rest = await store.readFrames(threadId, afterSeq, framesPerRead);
      for (const frame of rest) {
        afterSeq = frame.seq;
        yield frame;
      }
      if (rest.length === 0) return;
      continue;
    }
    await waitForFrames(landed, threadId, pollIntervalMs, signal);
  }
}

function waitForFrames(
  landed: EventEmitter,
  threadId: string,
  pollMs: number,
  signal: AbortSignal | undefined,
) {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      landed.off(threadId, done);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, pollMs);
    landed.on(threadId, done);
    signal?.addEventListener("abort", done, { once: true });
  });
}
