/**
 * PostgreSQL failing under the document server at random moments, as a property against a serial
 * oracle: two real document server processes whose PostgreSQL URL is a TCP relay's (`startTcpRelay`),
 * the log compacted every 4 updates, and three editors at once, each a real document client over HTTP
 * keeping to one server and pushing random scripts as plans (`postgres-faults-support.ts`), while the
 * relay loses the answers to random statements the servers send (a `COMMIT` most often: the
 * transaction committed, the server hears a reset; an insert into the log, an advisory lock or
 * unlock, a read), cuts every connection, and goes down for short windows. Each editor does what the
 * client docs say on each answer: a retryable error sends the same bytes again, or asks the plan's
 * state and, `unknown`, runs the script again under the plan's id on a fresh pull (ADR 0568).
 *
 * The oracle (`postgres-faults-oracle.ts`), after the relay heals: every answer was a result or a
 * documented retryable error, within its deadline, and a `server_error` only ever a 503 `unavailable`
 * with `Retry-After` (waited out half the time before sending again), never a 500 (ADR 0492); what the editors had left ends within a bound;
 * each server answers again within a bound, then a probe plan through each commits at its first push
 * (the pool not wedged, no lock left held) and wakes a waiting pull through the other; each plan is
 * stored at most once, as one of its own runs, exactly once when any answer said it committed, and
 * every plan's state agrees with the log; the document through both servers, and through a fresh
 * server process opening the same database directly, is the stored plans replayed serially in the
 * log's order, and the fresh process commits a probe plan too.
 *
 * `TACKLE_PROPERTY_ROUNDS` rounds (default 3), from seed `TACKLE_PROPERTY_SEED` (default 1); a failure
 * names its seed and round.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  createTestDatabase,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, interpretDocument, timelineSchema } from "../src/index.ts";
import { modelOf } from "./concurrent-editors-model.ts";
import { seedSnapshot } from "./concurrent-editors-support.ts";
import { checkFaultRound, probeServes, probeWakes, servesAgain } from "./postgres-faults-oracle.ts";
import {
  driveFaults,
  type FaultRound,
  type FaultSwitch,
  newFaultTally,
  runFaultEditor,
} from "./postgres-faults-support.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 3);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 1);
const editors = 3;
const scriptsPerEditor = 10;
/** Faults a round draws at most (fewer when the editors end first). */
const faultBudget = 120;
/** The log compacted every few updates, so compactions meet the faults too. */
const compactEvery = 4;
const adminToken = "admin-token-postgres-faults-0123456789";
const child = fileURLToPath(new URL("./concurrent-editors-server.ts", import.meta.url));

/** What the servers wrote on stderr, printed with a failing round. */
const serverLog: string[] = [];

/** A document server process on the PostgreSQL at `url`; its origin once it listens. */
async function startServer(
  url: string,
  children: ChildProcess[],
): Promise<{ origin: string; server: ChildProcess }> {
  const server = spawn(
    process.execPath,
    ["--conditions=@tackle/source", child, "postgres", url, adminToken, String(compactEvery)],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.push(server);
  let stderr = "";
  server.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    serverLog.push(chunk.toString());
  });
  const lines = createInterface({ input: server.stdout as NodeJS.ReadableStream });
  const origin = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server not ready: ${stderr}`)), underLoadMs(60_000));
    lines.on("line", (line) => {
      const match = /^ready (\S+)$/.exec(line);
      if (match === null) return;
      clearTimeout(timer);
      resolve(match[1] as string);
    });
    server.once("exit", (code) => reject(new Error(`server exited (${code}): ${stderr}`)));
  });
  return { origin, server };
}

async function stopServer(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise((resolve) => server.once("exit", resolve));
  server.kill("SIGTERM");
  await exited;
}

/** `work`, or a rejection once `ms` passed without it settling. */
async function within<Value>(work: Promise<Value>, ms: number, what: string): Promise<Value> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A short waiting pull through `origin`: the server starts listening to other servers' appends. */
async function startWatch(origin: string, round: FaultRound): Promise<void> {
  const client = createDocumentClient({ origin, token: round.token });
  const { version } = await client.pullInto(round.documentId, new LoroDoc());
  await client.pull(round.documentId, { since: version, waitMs: 20 });
}

describe("a document server whose PostgreSQL fails at random moments", () => {
  const children: ChildProcess[] = [];
  let database: TestDatabase;
  let relay: TcpRelay;
  let origins: string[] = [];
  const tally = newFaultTally();
  before(async () => {
    database = await createTestDatabase("docscript_postgres_faults");
    relay = await startTcpRelay(database.url);
    // One first, so the other opens a database already migrated.
    origins = [(await startServer(relay.url, children)).origin];
    origins.push((await startServer(relay.url, children)).origin);
  });
  after(async () => {
    for (const server of children) await stopServer(server);
    await relay?.close();
    await database?.drop();
  });
  for (let index = 0; index < rounds; index++) {
    const roundSeed = seed * 1_000 + index;
    it(`round ${index} (seed ${roundSeed}): each plan stored at most once, the document their serial replay`, async () => {
      const round: FaultRound = {
        origins,
        documentId: `doc-${roundSeed}`,
        token: `token-${roundSeed}-0123456789abcdef`,
        seed: roundSeed,
        plans: [],
        faults: [],
        tally,
      };
      const snapshot = seedSnapshot();
      const admin = createDocumentClient({ origin: origins[0] as string, token: round.token });
      assert.equal(
        await admin.createDocument(round.documentId, { adminToken, token: round.token, snapshot }),
        true,
      );
      const { issues: _, ...model } = modelOf(
        interpretDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema),
      );
      const logged = serverLog.length;
      const resetsBefore = relay.resets;
      // Each server's watch of the other's appends starts before the faults (a waiting pull starts it).
      for (const at of origins.keys()) await startWatch(origins[at] as string, round);
      const armed: FaultSwitch = { live: true };
      let fresh: ChildProcess | undefined;
      try {
        let editing = true;
        const edits = Promise.all(
          Array.from({ length: editors }, (_, editor) => runFaultEditor(round, editor, scriptsPerEditor)),
        ).finally(() => {
          editing = false;
        });
        await driveFaults(round, relay, armed, faultBudget, () => !editing);
        // Healed: no fault fires from here on.
        armed.live = false;
        relay.up();
        // What the editors had left ends within a bound once healed: nothing waits on a lost lock.
        await within(edits, underLoadMs(30_000), "the editors' plans left at the heal");
        for (const each of origins) await servesAgain(round, each);
        // Each server commits at once, and wakes a waiting pull on the other's push.
        for (const [at, origin] of origins.entries())
          await probeWakes(round, origins[(at + 1) % origins.length] as string, origin, `healed-${at}`);
        // A fresh server process opening the same database directly sees the same document.
        const started = await startServer(database.url, children);
        fresh = started.server;
        await probeServes(round, started.origin, "fresh");
        await checkFaultRound(round, model, [...origins, started.origin]);
      } catch (error) {
        round.faults.push(String((error as Error).stack));
      } finally {
        armed.live = false;
        relay.up();
        tally.resets += relay.resets - resetsBefore;
        if (fresh !== undefined) await stopServer(fresh);
      }
      assert.deepEqual(
        round.faults,
        [],
        `seed ${roundSeed} (TACKLE_PROPERTY_SEED=${seed}, round ${index}); the servers logged: ${serverLog.slice(logged).join("")}`,
      );
    });
  }
  it("the rounds met the faults", (context) => {
    context.diagnostic(JSON.stringify(tally));
    console.log(`postgres faults (seed ${seed}): ${JSON.stringify(tally)}`);
    if (rounds >= 3)
      assert.ok(
        tally.committed > 0 &&
          tally.retryableErrors > 0 &&
          tally.unavailable > 0 &&
          tally.resets > 0 &&
          tally.reruns > 0 &&
          tally.sentAgain > 0,
        JSON.stringify(tally),
      );
  });
});
