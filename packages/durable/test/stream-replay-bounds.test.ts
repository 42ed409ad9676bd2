/**
 * A reconnect storm as a flood of legal calls (ADR 0122), over real HTTP on a SQLite file: many streams
 * replaying a long thread from seq 0 at once. Each stream reads the thread's frames a small page at a
 * time, so the server holds a few of the states the frames carry per stream, not each stream's
 * whole replay; every stream still gets every frame, and another tenant is answered meanwhile.
 * Measured by what the store hands the server per read (what a stream holds while it writes the page
 * out), with the heap's growth reported beside it: the heap also holds the clients' side, in this process.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createGraph, createRunner, type DurableStore, type Runner } from "@tackle/durable";
import {
  createDurableClient,
  type DurableClient,
  type DurableServer,
  serveDurable,
} from "@tackle/durable/http";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const chat = createGraph<Record<string, unknown>>("chat").node("reply", (state) => ({
  turns: Number(state.turns ?? 0) + 1,
}));
const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
const authenticate = (request: Request) =>
  tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")];

const runs = 24;
const streams = 16;
const stateBytes = 256 * 1024;

let temp: TempStore;
let runner: Runner;
let server: DurableServer;
let acme: DurableClient;
let globex: DurableClient;
/** The bytes of frames each store read of the long thread answered, largest first kept. */
let largestRead = 0;

/** The store, counting what each read of frames hands the server. */
function counting(store: DurableStore): DurableStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      if (key !== "readFrames") return Reflect.get(target, key, receiver);
      return async (...args: Parameters<DurableStore["readFrames"]>) => {
        const frames = await target.readFrames(...args);
        const bytes = frames.reduce((sum, frame) => sum + JSON.stringify(frame).length, 0);
        largestRead = Math.max(largestRead, bytes);
        return frames;
      };
    },
  });
}

before(async () => {
  temp = tempSqliteStore();
  runner = createRunner({ store: counting(temp.store), graphs: [chat], pollIntervalMs: 20 });
  server = await serveDurable({ runner, authenticate });
  const client = (token: string) =>
    createDurableClient({ baseUrl: server.url, headers: { authorization: `Bearer ${token}` } });
  acme = client("token-a");
  globex = client("token-b");
  await globex.start("chat", {}, { threadId: "other" });
  // A long thread: each run's `run_started` and `run_completed` frames carry the 256 KiB state.
  for (let index = 0; index < runs; index++) {
    await acme.start("chat", index === 0 ? { blob: "x".repeat(stateBytes) } : {}, {
      threadId: "long",
      runId: `r${index}`,
    });
    while ((await acme.get("long")).status === "running") await new Promise((r) => setTimeout(r, 5));
  }
});

after(async () => {
  await server.close();
  await runner.idle();
  await temp.cleanup();
});

/** Reads one stream from seq 0 to its end, keeping only the count of bytes and frames. */
async function replay(): Promise<number> {
  const response = await fetch(`${server.url}/runs/long/frames`, {
    headers: { authorization: "Bearer token-a", "last-event-id": "0" },
  });
  assert.equal(response.status, 200);
  let bytes = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
  return bytes;
}

test("16 streams replaying a long thread at once hold a page each on the server, not the thread", async (t) => {
  const frames = await runner.frames("acme/long", { limit: 10_000 });
  const replayBytes = frames.reduce((sum, frame) => sum + JSON.stringify(frame).length, 0);
  assert.ok(replayBytes > runs * 2 * stateBytes, `${replayBytes} bytes a replay`);
  largestRead = 0;
  const base = process.memoryUsage().heapUsed;
  let peak = base;
  const sample = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().heapUsed);
  }, 2);
  const answered: number[] = [];
  let replaying = true;
  const other = (async () => {
    while (replaying) {
      await globex.get("other");
      answered.push(1);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    const results = await Promise.all(Array.from({ length: streams }, () => replay()));
    for (const bytes of results)
      assert.ok(bytes >= replayBytes, `a stream got ${bytes} of ${replayBytes} bytes`);
  } finally {
    replaying = false;
    clearInterval(sample);
    await other;
  }
  assert.ok(answered.length > 0, "the other tenant was answered during the storm");
  // A page is 16 frames: at most a few 256 KiB states, where a read of 500 was the whole 12.6 MB thread,
  // held by each of the 16 streams at once.
  const grown = peak - base;
  t.diagnostic(
    `largest read ${Math.round(largestRead / 1e6)} MB of a ${Math.round(replayBytes / 1e6)} MB replay; heap grew ${Math.round(grown / 1e6)} MB for ${streams} streams`,
  );
  assert.ok(largestRead <= 16 * (stateBytes + 1024), `a read of ${largestRead} bytes`);
});
