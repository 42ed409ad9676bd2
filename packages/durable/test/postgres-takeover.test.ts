/**
 * Durable on a shared PostgreSQL database with real runner processes: a SIGKILLed driver's run is
 * taken over by another process once the lease has passed, judged by the database's clock (processes
 * whose clocks are ten minutes off neither steal a live run nor wait ten minutes); racing claimants
 * are fenced so one drives; the fenced owner's writes are refused.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import { DurableError } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";

const child = fileURLToPath(new URL("./takeover/runner-child.ts", import.meta.url));
const directory = mkdtempSync(join(tmpdir(), "tackle-durable-takeover-"));
const children: ChildProcess[] = [];
let database: TestDatabase;
before(async () => {
  database = await createTestDatabase("tackle_durable_takeover");
});
after(async () => {
  for (const process_ of children)
    if (process_.exitCode === null && process_.signalCode === null) process_.kill("SIGKILL");
  rmSync(directory, { recursive: true, force: true });
  await database?.drop();
});

interface Runner {
  readonly process: ChildProcess;
  /** The next stdout line, or a failure after `timeoutMs`. */
  line(timeoutMs?: number): Promise<string>;
  go(): void;
}

const leaseMs = 2000;
const tenMinutes = 10 * 60_000;

async function startRunner(args: {
  thread: string;
  mode: "start" | "resume" | "resume-until" | "sweep";
  effects: string;
  holdMs: number;
  skewMs?: number;
}): Promise<Runner> {
  const process_ = spawn(
    process.execPath,
    [
      "--conditions=@tackle/source",
      child,
      database.url,
      "tk_",
      args.thread,
      args.mode,
      args.effects,
      String(leaseMs),
      String(args.holdMs),
      String(args.skewMs ?? 0),
    ],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  children.push(process_);
  let stderr = "";
  process_.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: Interface = createInterface({ input: process_.stdout as NodeJS.ReadableStream });
  const queue: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else queue.push(line);
  });
  const runner: Runner = {
    process: process_,
    line(timeoutMs = 60_000) {
      const queued = queue.shift();
      if (queued !== undefined) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no line from the runner in ${timeoutMs} ms: ${stderr}`)),
          timeoutMs,
        );
        waiting.push((line) => {
          clearTimeout(timer);
          resolve(line);
        });
      });
    },
    go() {
      process_.stdin?.write("go\n");
    },
  };
  assert.equal(await runner.line(), "ready");
  return runner;
}

/** The outcome line (JSON), skipping progress lines. */
async function outcome(runner: Runner): Promise<Record<string, unknown>> {
  for (;;) {
    const line = await runner.line();
    if (line.startsWith("{")) return JSON.parse(line) as Record<string, unknown>;
  }
}

function effects(path: string): { which: string; pid: number }[] {
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { which: string; pid: number });
}

it("a second process takes a SIGKILLed driver's run over after the lease, by the database's clock", {
  timeout: 150_000,
}, async () => {
  const effectsPath = join(directory, "takeover.jsonl");
  const driver = await startRunner({ thread: "t-1", mode: "start", effects: effectsPath, holdMs: 120_000 });
  driver.go();
  assert.equal(await driver.line(), "effect a");

  // A process whose clock runs ten minutes ahead: by its own clock the run has been silent for ten
  // minutes, but the database says the driver wrote within the lease, so it is refused.
  const ahead = await startRunner({
    thread: "t-1",
    mode: "resume",
    effects: effectsPath,
    holdMs: 0,
    skewMs: tenMinutes,
  });
  ahead.go();
  const refused = await outcome(ahead);
  assert.equal(refused.error, "run_active", JSON.stringify(refused));

  driver.process.kill("SIGKILL");
  const killedAt = Date.now();
  // A process whose clock runs ten minutes behind takes over once the database says the lease passed,
  // not ten minutes later.
  const rescuer = await startRunner({
    thread: "t-1",
    mode: "resume-until",
    effects: effectsPath,
    holdMs: 0,
    skewMs: -tenMinutes,
  });
  rescuer.go();
  const done = await outcome(rescuer);
  assert.equal(done.status, "completed", JSON.stringify(done));
  assert.deepEqual(done.state, { a: 1, b: 2 });
  assert.ok(Date.now() - killedAt < 60_000);

  // Each side effect once: "a" by the killed driver (journaled, not repeated), "b" by the rescuer.
  const lines = effects(effectsPath);
  assert.deepEqual(
    lines.map((line) => [line.which, line.pid]),
    [
      ["a", driver.process.pid],
      ["b", rescuer.process.pid],
    ],
  );
  // Frames from both processes in one numbered stream.
  const store = await createPostgresStore({ connectionString: database.url, tablePrefix: "tk_" });
  try {
    const frames = await store.readFrames("t-1", 0);
    assert.deepEqual(
      frames.map((frame) => frame.seq),
      frames.map((_frame, index) => index + 1),
    );
    assert.ok(frames.some((frame) => frame.type === "run_recovered"));
  } finally {
    await store.close();
  }
});

it("a runner process takes a SIGKILLed driver's run over by itself, with no resume from anyone", {
  timeout: 150_000,
}, async () => {
  const effectsPath = join(directory, "sweep.jsonl");
  const driver = await startRunner({ thread: "t-4", mode: "start", effects: effectsPath, holdMs: 120_000 });
  driver.go();
  assert.equal(await driver.line(), "effect a");
  // Killed once "a"'s outcome is journaled (it rides with the hold step's marker): before that, "a"
  // would run again, the crash window.
  const reader = await createPostgresStore({ connectionString: database.url, tablePrefix: "tk_" });
  try {
    const until = Date.now() + 10_000;
    while (!(await reader.readJournal("t-4")).some((record) => record.name === "hold")) {
      assert.ok(Date.now() < until, "the hold step's marker never landed");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await reader.close();
  }
  driver.process.kill("SIGKILL");
  const killedAt = Date.now();
  const sweeper = await startRunner({ thread: "t-4", mode: "sweep", effects: effectsPath, holdMs: 0 });
  sweeper.go();
  const done = await outcome(sweeper);
  assert.equal(done.status, "completed", JSON.stringify(done));
  assert.deepEqual(done.state, { a: 1, b: 2 });
  // The lease (2 s) plus at most one sweep interval (1 s), with room for a loaded machine.
  assert.ok(Date.now() - killedAt < 30_000);
  assert.deepEqual(
    effects(effectsPath).map((line) => [line.which, line.pid]),
    [
      ["a", driver.process.pid],
      ["b", sweeper.process.pid],
    ],
  );
  const store = await createPostgresStore({ connectionString: database.url, tablePrefix: "tk_" });
  try {
    const frames = await store.readFrames("t-4", 0);
    assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 1);
  } finally {
    await store.close();
  }
});

it("two processes racing to take over one run: one drives it, the other is refused", {
  timeout: 150_000,
}, async () => {
  const effectsPath = join(directory, "race.jsonl");
  const driver = await startRunner({ thread: "t-2", mode: "start", effects: effectsPath, holdMs: 120_000 });
  driver.go();
  assert.equal(await driver.line(), "effect a");
  driver.process.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, leaseMs + 500));

  const racers = await Promise.all(
    [0, 1].map(() => startRunner({ thread: "t-2", mode: "resume", effects: effectsPath, holdMs: 300 })),
  );
  for (const racer of racers) racer.go();
  const results = await Promise.all(racers.map(outcome));
  const drove = effects(effectsPath).filter((line) => line.which === "b");
  // Exactly one process ran the rest of the run.
  assert.equal(drove.length, 1, JSON.stringify(results));
  const winner = racers.findIndex((racer) => racer.process.pid === drove[0]?.pid);
  assert.ok(winner >= 0);
  assert.equal(results[winner]?.status, "completed");
  // The other was refused while the winner drove (or, if it came after, found the run finished).
  const loser = results[1 - winner];
  assert.ok(loser?.error === "run_active" || loser?.status === "completed", JSON.stringify(loser));
});

it("a forced race on the store: one claim wins, the other is refused, the fenced owner writes nothing", async () => {
  const first = await createPostgresStore({ connectionString: database.url, tablePrefix: "tk_" });
  const second = await createPostgresStore({ connectionString: database.url, tablePrefix: "tk_" });
  try {
    const at = new Date(Date.now() - 60_000).toISOString();
    await first.createRun({
      threadId: "t-3",
      runId: "r-3",
      graph: "takeover",
      status: "running",
      state: "{}",
      node: "work",
      cursor: "{}",
      interrupts: "[]",
      error: null,
      owner: "dead-owner",
      createdAt: at,
      updatedAt: at,
    });
    // createRun stamps the database's now; make the run look silent for a minute by that clock.
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await client.query(
      "UPDATE tk_runs SET updated_at = to_char((clock_timestamp() - interval '1 minute') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') WHERE thread_id = 't-3'",
    );
    await client.end();

    const claims = await Promise.allSettled([
      first.claimRun("t-3", "owner-1", ["running"], {}, { staleAfterMs: leaseMs }),
      second.claimRun("t-3", "owner-2", ["running"], {}, { staleAfterMs: leaseMs }),
    ]);
    const won = claims.filter((claim) => claim.status === "fulfilled");
    const lost = claims.filter((claim) => claim.status === "rejected");
    assert.equal(won.length, 1);
    assert.equal(lost.length, 1);
    const reason = (lost[0] as PromiseRejectedResult).reason;
    assert.ok(DurableError.isInstance(reason) && reason.code === "run_active", String(reason));
    const owner = (won[0] as PromiseFulfilledResult<{ run: { owner: string } }>).value.run.owner;

    // The previous owner (and the loser) are fenced: their writes throw and land nothing.
    for (const stale of ["dead-owner", owner === "owner-1" ? "owner-2" : "owner-1"]) {
      await assert.rejects(
        first.commit("t-3", stale, { frames: [{ seq: 99, type: "stale", data: {} }] }),
        (error) => DurableError.isInstance(error) && error.code === "run_fenced",
      );
    }
    assert.deepEqual(await first.readFrames("t-3", 0), []);
    await second.commit("t-3", owner, { frames: [{ seq: 1, type: "fresh", data: {} }] });
    assert.deepEqual(
      (await first.readFrames("t-3", 0)).map((frame) => frame.type),
      ["fresh"],
    );
  } finally {
    await first.close();
    await second.close();
  }
});
