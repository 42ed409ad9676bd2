/**
 * The processes and the plan of `migrations-race.property.test.ts`: worker processes
 * (`fixtures/race-worker.ts`) kept warm in a pool, one round's random plan (a migration list, each
 * process's prefix of it, its timeouts, a kill), and running a round's commands at once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { StorageErrorCode, StorageErrorDetails } from "@tackle/storage";
import { underLoadMs } from "@tackle/test-support";

export interface RaceMigrationSpec {
  readonly version: number;
  /** How long its work holds the lock (the process blocked on SQLite, `pg_sleep` on PostgreSQL). */
  readonly slowMs: number;
  /** Fails after its effects (a thrown error on SQLite, a division by zero on PostgreSQL). */
  readonly throws: boolean;
}

export type RaceCommand =
  | {
      readonly engine: "sqlite";
      readonly path: string;
      readonly migrations: readonly RaceMigrationSpec[];
      readonly busyTimeoutMs?: number;
    }
  | { readonly engine: "sqlite-hold"; readonly path: string; readonly holdMs: number }
  | {
      readonly engine: "postgres";
      readonly url: string;
      readonly schema: string;
      readonly migrations: readonly RaceMigrationSpec[];
      readonly lockTimeoutMs?: number;
      readonly abortAfterMs?: number;
    };

export interface RaceErrorReport {
  readonly storage: boolean;
  readonly name: string;
  readonly code: StorageErrorCode | string;
  readonly details: StorageErrorDetails;
  readonly message: string;
  readonly cause: string | undefined;
  readonly transient: boolean;
}

export interface SessionReport {
  readonly lockTimeout: string;
  readonly advisoryLocks: number;
}

export type RaceReply =
  | { readonly ok: { readonly from: number; readonly to: number }; readonly session?: SessionReport }
  | { readonly error: RaceErrorReport; readonly session?: SessionReport }
  | { readonly fatal: string };

export interface RunOutcome {
  readonly pid: number;
  /** Undefined when the process died (killed) or missed its deadline before answering. */
  readonly reply: RaceReply | undefined;
  readonly killed: boolean;
  readonly missedDeadline: boolean;
  readonly elapsedMs: number;
  /** The versions whose work it began, in order. */
  readonly progress: readonly number[];
  readonly stderr: string;
}

const script = fileURLToPath(new URL("./fixtures/race-worker.ts", import.meta.url));

interface Pending {
  readonly resolve: (reply: RaceReply | undefined) => void;
  readonly onProgress: (version: number) => void;
  readonly progress: number[];
}

export class RaceWorker {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  #pending: Pending | undefined;
  #stderr = "";
  #killed = false;

  constructor() {
    this.child = spawn(process.execPath, ["--conditions=@tackle/source", script], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
    void this.exited.then(() => this.#pending?.resolve(undefined));
    let markReady: () => void = () => undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      this.exited.then(() => reject(new Error(`a race worker died starting: ${this.#stderr}`)));
    });
    this.ready.catch(() => undefined);
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (line === "ready") return markReady();
      const message = JSON.parse(line) as RaceReply | { progress: number };
      if ("progress" in message) {
        this.#pending?.progress.push(message.progress);
        this.#pending?.onProgress(message.progress);
      } else this.#pending?.resolve(message);
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && !this.#killed;
  }

  kill(): void {
    this.#killed = true;
    this.child.kill("SIGKILL");
  }

  /** Sends `command`; answers when the worker replies, dies, or misses `deadlineMs` (it is then killed). */
  async run(
    command: RaceCommand,
    deadlineMs: number,
    onProgress: (version: number) => void = () => undefined,
  ): Promise<RunOutcome> {
    const started = performance.now();
    let missedDeadline = false;
    const progress: number[] = [];
    const reply = await new Promise<RaceReply | undefined>((resolve) => {
      const timer = setTimeout(() => {
        missedDeadline = true;
        this.kill();
      }, deadlineMs);
      this.#pending = {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        onProgress,
        progress,
      };
      this.child.stdin?.write(`${JSON.stringify(command)}\n`);
    });
    this.#pending = undefined;
    return {
      pid: this.child.pid as number,
      reply,
      killed: this.#killed && !missedDeadline && reply === undefined,
      missedDeadline,
      elapsedMs: performance.now() - started,
      progress,
      stderr: this.#stderr,
    };
  }
}

/** Workers started ahead, so a round pays no process start (a killed one is replaced in the background). */
export class WorkerPool {
  #available: Promise<RaceWorker>[] = [];
  #all: RaceWorker[] = [];

  constructor(size: number) {
    for (let index = 0; index < size; index++) this.#available.push(this.#start());
  }

  #start(): Promise<RaceWorker> {
    const worker = new RaceWorker();
    this.#all.push(worker);
    return worker.ready.then(() => worker);
  }

  async take(count: number): Promise<RaceWorker[]> {
    const taken: Promise<RaceWorker>[] = [];
    for (let index = 0; index < count; index++) taken.push(this.#available.shift() ?? this.#start());
    return Promise.all(taken);
  }

  giveBack(workers: readonly RaceWorker[]): void {
    for (const worker of workers)
      this.#available.push(worker.alive ? Promise.resolve(worker) : this.#start());
  }

  async close(): Promise<void> {
    for (const worker of this.#all) if (worker.alive) worker.kill();
    await Promise.all(this.#all.map((worker) => worker.exited));
  }
}

/** Kill the process `delayMs` after it begins its `nth` migration's work, or `atMs` after its command. */
export type KillPlan = { readonly nth: number; readonly delayMs: number } | { readonly atMs: number };

export interface ProcessPlan {
  /** How many of the round's migrations this process's code knows (1..prefix). */
  readonly prefix: number;
  readonly busyTimeoutMs?: number;
  readonly lockTimeoutMs?: number;
  readonly abortAfterMs?: number;
  readonly kill?: KillPlan;
}

export interface RoundPlan {
  readonly migrations: readonly RaceMigrationSpec[];
  readonly processes: readonly ProcessPlan[];
  /** The version of the migration that fails, if one does. */
  readonly throwsAt: number | undefined;
}

export type Engine = "sqlite" | "postgres";

const shape = {
  sqlite: { versions: 5, processes: [2, 4], slowMs: [2, 12], shortWait: 0.15, killRound: 0.15 },
  postgres: { versions: 4, processes: [2, 3], slowMs: [10, 60], shortWait: 0.15, killRound: 0.2 },
} as const;

export function planRound(random: () => number, engine: Engine): RoundPlan {
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low + 1));
  const chance = (p: number) => random() < p;
  const { versions, processes, slowMs, shortWait, killRound } = shape[engine];
  const count = between(1, versions);
  const throwsAt = chance(0.25) ? between(1, count) : undefined;
  const migrations = Array.from({ length: count }, (_, index) => ({
    version: index + 1,
    slowMs: chance(0.45) ? between(slowMs[0], slowMs[1]) : 0,
    throws: throwsAt === index + 1,
  }));
  const plans: ProcessPlan[] = Array.from({ length: between(processes[0], processes[1]) }, () => {
    const prefix = chance(0.08) ? 0 : between(1, count);
    if (engine === "sqlite")
      return chance(shortWait) ? { prefix, busyTimeoutMs: between(5, 40) } : { prefix };
    if (chance(shortWait)) return { prefix, lockTimeoutMs: between(20, 100) };
    return chance(shortWait) ? { prefix, abortAfterMs: between(0, 80) } : { prefix };
  });
  if (chance(killRound)) {
    const victim = between(0, plans.length - 1);
    const plan = plans[victim] as ProcessPlan;
    const target = migrations[between(1, Math.max(1, plan.prefix)) - 1] as RaceMigrationSpec;
    const kill: KillPlan =
      plan.prefix > 0 && chance(0.7)
        ? { nth: between(1, plan.prefix), delayMs: between(0, target.slowMs + 2) }
        : { atMs: between(0, 30) };
    plans[victim] = { ...plan, kill };
  }
  return { migrations, processes: plans, throwsAt };
}

/** The longest any process of the round may take: all the round's work one after another, and room. */
export function roundDeadlineMs(plan: RoundPlan): number {
  let work = 0;
  for (const process_ of plan.processes)
    for (const migration of plan.migrations.slice(0, process_.prefix)) work += migration.slowMs + 5;
  return underLoadMs(4000) + 2 * work;
}

/** Sends each process its command at once, kills the planned victim, and collects every outcome. */
export async function runRound(
  workers: readonly RaceWorker[],
  plan: RoundPlan,
  command: (process_: ProcessPlan) => RaceCommand,
): Promise<RunOutcome[]> {
  const deadline = roundDeadlineMs(plan);
  return Promise.all(
    plan.processes.map(async (process_, index) => {
      const worker = workers[index] as RaceWorker;
      const kill = process_.kill;
      let timer: NodeJS.Timeout | undefined;
      const killIn = (ms: number) => {
        timer ??= setTimeout(() => worker.kill(), ms);
      };
      const running = worker.run(command(process_), deadline, (version) => {
        if (kill !== undefined && "nth" in kill && worker.alive) {
          const begun = plan.migrations.findIndex((migration) => migration.version === version);
          if (begun >= 0 && begun + 1 >= kill.nth) killIn(kill.delayMs);
        }
      });
      if (kill !== undefined && "atMs" in kill) killIn(kill.atMs);
      const outcome = await running;
      clearTimeout(timer);
      return outcome;
    }),
  );
}
