/**
 * The tasks bench's baseline in a thread of its own: a replica of the seeded document, and each task's
 * edits written straight to it (`Task.loro`, one commit, the update exported), timed here. Its own
 * thread, so that what the baseline leaves behind (a Loro map handle for each row it read: ~300,000
 * after the shift's or the mute's at 100k entities, each freed by a finalizer once collected) is not
 * collected in the tool's thread while the next task runs.
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { LoroDoc } from "loro-crdt";
import { tasks } from "./task-list.ts";

/** The baseline's thread, holding a replica of `snapshot`. */
export interface Baseline {
  /** Task `index`'s edits straight to Loro, in ms. */
  run(index: number): Promise<number>;
  close(): Promise<void>;
}

export async function startBaseline(snapshot: Uint8Array): Promise<Baseline> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { snapshot } });
  const answers: ((message: { ms?: number; error?: string }) => void)[] = [];
  worker.on("message", (message: { ms?: number; error?: string }) => answers.shift()?.(message));
  const ask = (index: number | undefined) =>
    new Promise<{ ms?: number; error?: string }>((resolve) => {
      answers.push(resolve);
      worker.postMessage(index);
    });
  const loaded = await ask(undefined);
  if (loaded.error !== undefined) throw new Error(loaded.error);
  return {
    async run(index) {
      const answer = await ask(index);
      if (answer.error !== undefined) throw new Error(answer.error);
      return answer.ms ?? 0;
    },
    async close() {
      await worker.terminate();
    },
  };
}

if (!isMainThread && parentPort !== null) {
  const port = parentPort;
  let replica: LoroDoc | undefined;
  port.on("message", (index: number | undefined) => {
    try {
      if (index === undefined) {
        replica = LoroDoc.fromSnapshot((workerData as { snapshot: Uint8Array }).snapshot);
        replica.setPeerId(42);
        port.postMessage({});
        return;
      }
      const task = tasks[index];
      if (replica === undefined || task === undefined) throw new Error(`no task ${index}`);
      const start = performance.now();
      const before = replica.oplogVersion();
      task.loro(replica);
      replica.commit();
      replica.export({ mode: "update", from: before });
      port.postMessage({ ms: performance.now() - start });
    } catch (error) {
      port.postMessage({ error: (error as Error).message });
    }
  });
}
