/**
 * Durable floods (ADR 0122), over real HTTP (`serveDurable`) on a SQLite file, one tenant: a thread's
 * state grown start after start (`maxStateBytes`), a long thread's history read whole (`maxHistoryBytes`),
 * and many streams replaying a long thread from seq 0 at once (frames a stream reads per store call).
 */
import { copyFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { createGraph, createRunner, type DurableStore, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { createSqliteStore } from "@tackle/durable/sqlite";
import {
  countRefusal,
  errorCode,
  type FloodRow,
  measured,
  mib,
  rest,
  sleep,
  sqliteBytes,
  type Variant,
} from "./measure.ts";

type Chat = Record<string, unknown>;
/** One node per run: the caller's turn goes in as input, the node counts the turns. */
const chat = createGraph<Chat>("chat").node("reply", (state) => ({ turns: Number(state.turns ?? 0) + 1 }));
const authorization = { authorization: "Bearer token-acme" };
const authenticate = (request: Request) =>
  request.headers.get("authorization") === authorization.authorization ? "acme" : undefined;

/** What a stream asks the store per call (`watch-frames.ts`), and what it asked before ADR 0122. */
const streamFramesPerRead = 16;
const framesPerReadBefore = 500;

interface Served {
  readonly url: string;
  readonly path: string;
  readonly runner: Runner;
  readonly server: DurableServer;
  close(): Promise<void>;
}

/**
 * The store with a stream's reads widened to 500 frames a call: there is no option for a stream's page
 * (a constant in `watch-frames.ts`), so the unbounded baseline is this wrapper around the same store.
 */
function wideStreamReads(store: DurableStore): DurableStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      if (key !== "readFrames") return Reflect.get(target, key, receiver);
      return (...args: Parameters<DurableStore["readFrames"]>) => {
        const [threadId, afterSeq, limit, types] = args;
        const wide = limit === streamFramesPerRead && types === undefined;
        return target.readFrames(threadId, afterSeq, wide ? framesPerReadBefore : limit, types);
      };
    },
  });
}

async function serve(
  directory: string,
  options: { maxStateBytes?: number; maxHistoryBytes?: number; wideStreams?: boolean },
): Promise<Served> {
  const path = join(directory, "durable.sqlite");
  const opened = createSqliteStore({ path });
  const store = options.wideStreams === true ? wideStreamReads(opened) : opened;
  const runner = createRunner({
    store,
    graphs: [chat],
    pollIntervalMs: 20,
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
  });
  const server = await serveDurable({
    runner,
    authenticate,
    ...(options.maxHistoryBytes === undefined ? {} : { maxHistoryBytes: options.maxHistoryBytes }),
  });
  return {
    url: server.url,
    path,
    runner,
    server,
    async close() {
      await server.close();
      await runner.idle();
      await opened.close();
    },
  };
}

/** Starts a run on the thread over HTTP and waits until it rests; the answer's status and code. */
async function turn(
  url: string,
  threadId: string,
  runId: string,
  input: Chat,
): Promise<[number, string | undefined]> {
  const response = await fetch(`${url}/runs`, {
    method: "POST",
    headers: { ...authorization, "content-type": "application/json" },
    body: JSON.stringify({ graph: "chat", input, threadId, runId }),
  });
  const body = await response.text();
  if (response.status !== 201) return [response.status, errorCode(body)];
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = (await (await fetch(`${url}/runs/${threadId}`, { headers: authorization })).json()) as {
      status: string;
    };
    if (run.status !== "running") return [201, undefined];
    if (Date.now() > deadline) throw new Error(`run ${runId} did not rest within 60 s`);
    await sleep(5);
  }
}

/** Many starts on one thread, each adding a 512 KiB key: the state carried grows by a key a turn. */
export async function stateFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const starts = Math.round(12 * scale);
  const keyBytes = 512 * 1024;
  const served = await serve(
    directory,
    variant === "bounded" ? {} : { maxStateBytes: Number.POSITIVE_INFINITY },
  );
  const refused: Record<string, number> = {};
  let accepted = 0;
  let slowest = 0;
  try {
    const result = await measured(async () => {
      for (let index = 0; index < starts; index++) {
        const started = performance.now();
        const [status, code] = await turn(served.url, "grow", `r${index}`, {
          [`k${index}`]: "x".repeat(keyBytes),
        });
        slowest = Math.max(slowest, performance.now() - started);
        if (status === 201) accepted++;
        else countRefusal(refused, status, code);
      }
    });
    return {
      flood: "durable: state",
      workload: `${starts} starts on one thread, each adding a 512 KiB key`,
      service:
        variant === "bounded"
          ? "bounded (maxStateBytes 4 MiB, default)"
          : "unbounded (maxStateBytes: Infinity)",
      accepted,
      refused,
      storedBytes: sqliteBytes(served.path),
      ...rest(result),
      notes: `slowest start ${(slowest / 1000).toFixed(2)} s`,
    };
  } finally {
    await served.close();
  }
}

/** The long thread's runs, at every scale (the ADR's): 60 turns of a 256 KiB state, 31 MB replayed. */
const longRuns = 60;

/**
 * The long thread, in the served store: built once per bench run (60 turns of a `stateBytes` state, the
 * first turn adding it, the rest carrying it) and its file kept beside the row's directory, so the next
 * flood's child opens a copy instead of building it again.
 */
async function serveLongThread(directory: string, options: Parameters<typeof serve>[1]): Promise<Served> {
  const seed = join(dirname(directory), "long-thread.sqlite");
  if (existsSync(seed)) {
    copyFileSync(seed, join(directory, "durable.sqlite"));
    return serve(directory, options);
  }
  const served = await serve(directory, options);
  for (let index = 0; index < longRuns; index++) {
    const input = index === 0 ? { blob: "x".repeat(256 * 1024) } : {};
    const [status] = await turn(served.url, "long", `t${index}`, input);
    if (status !== 201) throw new Error(`the long thread's run ${index} was refused ${status}`);
  }
  // A consistent copy: every frame checkpointed into the main file.
  const database = new DatabaseSync(served.path);
  database.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  database.close();
  copyFileSync(served.path, seed);
  return served;
}

/** The whole history of a long thread, by two callers at once: in pages (bounded) or in one body each. */
export async function historyFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const callers = Math.round(2 * scale);
  const served = await serveLongThread(
    directory,
    variant === "bounded" ? {} : { maxHistoryBytes: Number.POSITIVE_INFINITY },
  );
  try {
    let requests = 0;
    let bytes = 0;
    let largest = 0;
    let checkpoints = 0;
    const readWhole = async () => {
      let afterSeq: number | undefined;
      do {
        const query = `limit=1000${afterSeq === undefined ? "" : `&afterSeq=${afterSeq}`}`;
        const response = await fetch(`${served.url}/runs/long/history?${query}`, { headers: authorization });
        const body = await response.text();
        if (response.status !== 200)
          throw new Error(`history answered ${response.status}: ${body.slice(0, 200)}`);
        requests++;
        bytes += body.length;
        largest = Math.max(largest, body.length);
        const page = JSON.parse(body) as { checkpoints: unknown[]; nextAfterSeq?: number };
        checkpoints += page.checkpoints.length;
        afterSeq = page.nextAfterSeq;
      } while (afterSeq !== undefined);
    };
    const result = await measured(() => Promise.all(Array.from({ length: callers }, readWhole)));
    return {
      flood: "durable: history",
      workload: `${callers} callers at once each reading the whole history of a ${longRuns}-run thread of a 256 KiB state (${checkpoints / callers} checkpoints, ${mib(bytes / callers)} MiB)`,
      service:
        variant === "bounded"
          ? "bounded (maxHistoryBytes 8 MiB, default)"
          : "unbounded (maxHistoryBytes: Infinity)",
      accepted: requests,
      refused: {},
      ...rest(result),
      notes: `${requests} requests, largest body ${mib(largest)} MiB`,
    };
  } finally {
    await served.close();
  }
}

/** Streams replaying a long thread from seq 0 at once, each discarding what it reads. */
export async function streamsFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const runs = longRuns;
  const streams = Math.round(6 * scale);
  const served = await serveLongThread(directory, { wideStreams: variant === "unbounded" });
  try {
    const refused: Record<string, number> = {};
    let accepted = 0;
    let bytes = 0;
    const replay = async () => {
      const response = await fetch(`${served.url}/runs/long/frames`, {
        headers: { ...authorization, "last-event-id": "0" },
      });
      if (response.status !== 200) {
        countRefusal(refused, response.status, errorCode(await response.text()));
        return;
      }
      accepted++;
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
    };
    const result = await measured(() => Promise.all(Array.from({ length: streams }, replay)));
    return {
      flood: "durable: streams",
      workload: `${streams} streams at once replaying a ${runs}-run thread of a 256 KiB state from seq 0`,
      service:
        variant === "bounded"
          ? `bounded (${streamFramesPerRead} frames a store read, as shipped)`
          : `unbounded (${framesPerReadBefore} frames a store read: no option, a store wrapper)`,
      accepted,
      refused,
      ...rest(result),
      notes: `${mib(bytes)} MiB streamed in all`,
    };
  } finally {
    await served.close();
  }
}
