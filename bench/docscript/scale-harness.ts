/**
 * What the scale benches share: the seeded SQLite file per size (built once by `scale-seed.ts` in a
 * child process, kept under the OS temp dir) and the document server in a child process of its own.
 */
import { type ChildProcess, fork, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqliteMigrations } from "../../packages/docscript/src/server/migrations.ts";

export interface Seed {
  readonly entityCount: number;
  readonly firstClips: readonly string[];
  readonly snapshotBytes: number;
}

/**
 * The seeded SQLite file for `count` entities: built once by `scale-seed.ts` in a child process and
 * kept under the OS temp dir, keyed by size and store schema version (never in the repository).
 */
export function seedFile(count: number, overlayEvery?: number): { path: string; seed: Seed } {
  const cache = join(tmpdir(), "tackle-docscript-scale");
  mkdirSync(cache, { recursive: true });
  const base = join(
    cache,
    `timeline-${count}${overlayEvery === undefined ? "" : `-overlay${overlayEvery}`}-schema${sqliteMigrations.at(-1)?.version}`,
  );
  if (!existsSync(`${base}.json`))
    withSeedLock(base, () => existsSync(`${base}.json`) || seed(count, base, overlayEvery));
  return { path: `${base}.sqlite`, seed: JSON.parse(readFileSync(`${base}.json`, "utf8")) as Seed };
}

/**
 * Runs `build` holding `<base>.lock` (a directory: `mkdir` is atomic), so two benches seeding one size
 * at once build it once; the other waits (up to an hour: seeding 1M took 2,600 s at load) and reuses it.
 */
function withSeedLock(base: string, build: () => unknown): void {
  const lock = `${base}.lock`;
  const deadline = Date.now() + 3_600_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (Date.now() > deadline)
        throw new Error(`${lock} held for an hour: remove it if no bench is seeding`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2_000);
    }
  }
  try {
    build();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function seed(count: number, base: string, overlayEvery: number | undefined): void {
  const partial = `${base}.partial.sqlite`;
  rmSync(partial, { force: true });
  const started = performance.now();
  const seeded = runSeed(count, partial, overlayEvery);
  renameSync(partial, `${base}.sqlite`);
  writeFileSync(`${base}.json`, seeded.trim());
  process.stderr.write(
    `${count}: seeded in ${Math.round((performance.now() - started) / 1000)} s: ${seeded}`,
  );
}

/** Runs `scale-seed.ts` into `target` (a file, or a PostgreSQL URL) in a child process; its report. */
export function runSeed(count: number, target: string, overlayEvery: number | undefined): string {
  const child = spawnSync(
    process.execPath,
    [
      "--conditions=@tackle/source",
      new URL("./scale-seed.ts", import.meta.url).pathname,
      String(count),
      target,
      ...(overlayEvery === undefined ? [] : [`--overlay-every=${overlayEvery}`]),
    ],
    { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 20 },
  );
  if (child.status !== 0) throw new Error(`seeding ${count} failed (${child.status}): ${child.stdout}`);
  return child.stdout;
}

export interface ServerProcess {
  readonly url: string;
  /** One request to the server's process over its IPC channel, and its answer. */
  ask<T>(message: unknown): Promise<T>;
  close(): Promise<void>;
}

/** The document server over a file, or another peer of it (`--peer`), in a child process (`scale-server.ts`). */
export async function startServer(args: readonly string[]): Promise<ServerProcess> {
  const child: ChildProcess = fork(new URL("./scale-server.ts", import.meta.url).pathname, [...args], {
    // `node --cpu-prof --cpu-prof-dir=<dir> bench/docscript/tasks.ts` profiles the server child too.
    execArgv: [
      "--conditions=@tackle/source",
      ...process.execArgv.filter((flag) => flag === "--cpu-prof" || /^--cpu-prof-(dir|interval)=/.test(flag)),
    ],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const next = <T>(): Promise<T> =>
    new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the server process exited (${code})`));
      child.once("exit", onExit);
      child.once("message", (message: T & { error?: string }) => {
        child.off("exit", onExit);
        if (message.error !== undefined) reject(new Error(message.error));
        else resolve(message);
      });
    });
  const { ready } = await next<{ ready: string }>();
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(message: unknown): Promise<T> => {
    const answer = queue.then(() => {
      const reply = next<T>();
      child.send(message as object);
      return reply;
    });
    queue = answer.catch(() => undefined);
    return answer;
  };
  return {
    url: ready,
    ask,
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      try {
        await ask({ op: "close" });
      } catch {
        child.kill();
      }
      const timer = setTimeout(() => child.kill(), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
