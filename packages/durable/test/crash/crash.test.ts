/**
 * The crash window, shown: a child process runs a graph of side-effecting tools and is killed with
 * SIGKILL at seeded random points (a third of the resuming processes are killed again); a fresh
 * process resumes each run to completion. Every side effect happened exactly once, except crash-window
 * re-runs, which carry attempt 2 or more and the same idempotency key.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { seededRandom } from "@tackle/test-support";

const child = fileURLToPath(new URL("./crash-child.ts", import.meta.url));
const trials = Number(process.env.TACKLE_CRASH_TRIALS ?? 100);
const concurrency = 4;
const expectedSteps = 12;

/** Where to kill a child: `delayMs` after its `afterEffects`-th side effect (after "ready" for 0). */
interface KillPoint {
  readonly afterEffects: number;
  readonly delayMs: number;
}

function runChild(
  args: string[],
  kill?: KillPoint,
): Promise<{ code: number | null; killed: boolean; output: string }> {
  return new Promise((resolve, reject) => {
    const process_ = spawn(process.execPath, ["--conditions=@tackle/source", child, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let killed = false;
    let timer: NodeJS.Timeout | undefined;
    process_.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (kill === undefined || timer !== undefined || !output.includes("ready\n")) return;
      const effects = output.split("effect\n").length - 1;
      if (effects < kill.afterEffects) return;
      timer = setTimeout(() => {
        killed = process_.kill("SIGKILL");
      }, kill.delayMs);
    });
    process_.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    process_.on("error", reject);
    process_.on("exit", (code) => {
      if (timer !== undefined) clearTimeout(timer);
      resolve({ code, killed: killed && code === null, output });
    });
  });
}

/** Whether the killed process got as far as creating the run (else the next one starts it afresh). */
function runExists(databasePath: string, threadId: string): boolean {
  if (!existsSync(databasePath)) return false;
  const database = new DatabaseSync(databasePath);
  try {
    return database.prepare("SELECT 1 FROM durable_runs WHERE thread_id = ?").get(threadId) !== undefined;
  } catch {
    return false;
  } finally {
    database.close();
  }
}

interface Counts {
  trials: number;
  killed: number;
  finishedBeforeKill: number;
  sideEffects: number;
  crashWindowReruns: number;
  restartsBeforeEffect: number;
  /** Trials whose first resuming process was killed too. */
  killedWhileResuming: number;
}

async function trial(directory: string, index: number, seed: number, counts: Counts): Promise<void> {
  const databasePath = join(directory, `run-${index}.sqlite`);
  const effectsPath = join(directory, `effects-${index}.jsonl`);
  const threadId = `crash-${index}`;
  // Each trial draws from its own generator, so a failing trial replays alone from seed + index.
  const random = seededRandom(seed + index);
  // Anywhere in the run: after 0..11 of its 12 effects, then 0..3 ms more (the window is ~1 ms wide).
  const point = { afterEffects: Math.floor(random() * expectedSteps), delayMs: random() * 3 };
  const first = await runChild([databasePath, effectsPath, threadId, "start"], point);
  if (first.killed) counts.killed++;
  else {
    assert.equal(first.code, 0, first.output);
    counts.finishedBeforeKill++;
  }
  // One trial in three also kills the first process that resumes; a third one finishes the run. A kill
  // before the run was created leaves nothing to resume: the next process starts it afresh.
  const killResumer = random() < 1 / 3;
  const resumePoint = { afterEffects: Math.floor(random() * 4), delayMs: random() * 3 };
  for (let attempt = 0; ; attempt++) {
    const killAt = attempt === 0 && killResumer ? resumePoint : undefined;
    const next = await runChild(
      [databasePath, effectsPath, threadId, runExists(databasePath, threadId) ? "resume" : "start"],
      killAt,
    );
    if (next.killed) {
      counts.killedWhileResuming++;
      continue;
    }
    assert.equal(
      next.code,
      0,
      `trial ${index} (seed ${seed + index}, killed at ${JSON.stringify(point)}) did not resume: ${next.output}`,
    );
    break;
  }

  const lines = readFileSync(effectsPath, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { key: string; attempt: number });
  const check = new DatabaseSync(databasePath);
  const journal = check
    .prepare("SELECT key, state, attempt FROM durable_journal WHERE thread_id = ?")
    .all(threadId) as {
    key: string;
    state: string;
    attempt: number;
  }[];
  const { status, run_id: runId } = check
    .prepare("SELECT status, run_id FROM durable_runs WHERE thread_id = ?")
    .get(threadId) as { status: string; run_id: string };
  check.close();
  assert.equal(status, "completed");
  assert.equal(journal.length, expectedSteps);
  // Grouped by the full idempotency key `${runId}:${stepKey}`: every effect line of a step, re-runs
  // included, must carry the identical key of the one run, so a re-run under another run id shows.
  const byKey = new Map<string, number[]>();
  for (const line of lines) {
    assert.ok(line.key.startsWith(`${runId}:`), `trial ${index}: ${line.key} is not under run ${runId}`);
    byKey.set(line.key, [...(byKey.get(line.key) ?? []), line.attempt]);
  }
  assert.equal(byKey.size, expectedSteps, `trial ${index}: every step's effect happened under one key`);
  for (const record of journal) {
    const attempts = byKey.get(`${runId}:${record.key}`);
    assert.ok(attempts !== undefined, `trial ${index}: no effect keyed ${runId}:${record.key}`);
    assert.equal(record.state, "done");
    counts.sideEffects += attempts.length;
    // Attempts only grow, the last one is the journaled one, and every extra effect is a re-run in the
    // crash window of a killed process (same key, attempt ≥ 2).
    assert.deepEqual(
      attempts,
      [...attempts].sort((a, b) => a - b),
      `trial ${index}: ${record.key} attempts out of order`,
    );
    assert.equal(
      new Set(attempts).size,
      attempts.length,
      `trial ${index}: ${record.key} ran twice as one attempt`,
    );
    assert.equal(
      attempts.at(-1),
      record.attempt,
      `trial ${index}: ${record.key} journal says ${record.attempt}`,
    );
    if (attempts.length === 1) {
      // Once; attempt 2 when the kill landed after the step started but before its effect.
      if (record.attempt >= 2) counts.restartsBeforeEffect++;
    } else {
      assert.ok(
        attempts.length <= 3,
        `trial ${index}: ${record.key} ran ${attempts.length} times with two kills at most`,
      );
      for (const rerun of attempts.slice(1)) {
        assert.ok(rerun >= 2, `trial ${index}: a re-run of ${record.key} carries attempt 2 or more`);
      }
      counts.crashWindowReruns += attempts.length - 1;
    }
  }
}

test(`SIGKILL at ${trials} seeded random points: each run resumes in a fresh process, effects exactly once but for crash-window re-runs`, {
  // A hundred child processes: about a minute on a quiet two-core box, several when it is shared.
  timeout: 600_000,
}, async (context) => {
  const directory = mkdtempSync(join(tmpdir(), "durable-crash-"));
  const seed = Number(process.env.TACKLE_CRASH_SEED ?? 20261129);
  const counts: Counts = {
    killedWhileResuming: 0,
    trials,
    killed: 0,
    finishedBeforeKill: 0,
    sideEffects: 0,
    crashWindowReruns: 0,
    restartsBeforeEffect: 0,
  };
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < trials) await trial(directory, next++, seed, counts);
      }),
    );
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
  context.diagnostic(`crash test counts: ${JSON.stringify(counts)}`);
  // The seeded points must really cut runs short, and some must land inside the window.
  assert.ok(counts.killed >= trials * 0.5, `only ${counts.killed} of ${trials} runs were killed mid-way`);
  assert.ok(counts.crashWindowReruns > 0, "no kill landed in the crash window; widen the delays");
  assert.equal(counts.sideEffects, counts.trials * expectedSteps + counts.crashWindowReruns);
});
