/**
 * One call across machines, exactly once (ADR 0210, 0213): a durable driver whose steps call a tool
 * served by two other node processes is SIGKILLed 200 times at random points — while it waits, while
 * its tool runs on a node, and inside durable's crash window (the tool answered, the step's record not
 * yet durable) — and in some trials the node running the tool, or the node that just answered, is
 * SIGKILLed too. A fresh driver takes each run over. The tool's effects must equal the steps, with no
 * duplicate anywhere: a node killed between its tool's effect and the ledger's record is taken over by
 * the other, which asks the tool (its `recover`, by the key) whether the effect landed. Real
 * nats-server, real processes, SQLite journal.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";

const trials = Number(process.env.TACKLE_EXACTLY_ONCE_TRIALS ?? 200);
const stepsPerRun = 3;
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const directory = mkdtempSync(join(tmpdir(), "tackle-exactly-once-"));
const effectsFile = join(directory, "effects");
let nats: NatsServerHandle;
const processes = new Set<ChildProcess>();

/** A child process whose stdout lines listeners watch. */
interface Proc {
  readonly child: ChildProcess;
  readonly listeners: Set<(line: string) => void>;
  send(line: string): void;
  /** The next line matching `pattern`, or undefined after `ms`. */
  next(pattern: RegExp, ms: number): Promise<RegExpExecArray | undefined>;
}

function spawnProc(args: readonly string[], onLine: (line: string) => void = () => {}): Promise<Proc> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  processes.add(child);
  child.once("exit", () => processes.delete(child));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const listeners = new Set<(line: string) => void>([onLine]);
  const proc: Proc = {
    child,
    listeners,
    send: (line) => {
      if (child.exitCode === null && child.signalCode === null) child.stdin?.write(`${line}\n`);
    },
    next: (pattern, ms) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          resolve(undefined);
        }, ms);
        const listener = (line: string) => {
          const match = pattern.exec(line);
          if (match === null) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(match);
        };
        listeners.add(listener);
      }),
  };
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
    for (const listener of [...listeners]) listener(line);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args[0]} not ready after 120 s: ${stderr}`)), 120_000);
    const ready = (line: string) => {
      if (line !== "ready") return;
      clearTimeout(timer);
      listeners.delete(ready);
      resolve(proc);
    };
    listeners.add(ready);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${args[0]} exited (${code ?? signal}) before it was ready: ${stderr}`));
    });
  }).then(() => {
    child.removeAllListeners("exit");
    child.once("exit", () => processes.delete(child));
    return proc;
  });
}

before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  for (const child of processes) child.kill("SIGKILL");
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

/** The two node processes serving the tool: started, killed and started again, and what they report. */
function nodePair() {
  /** Keys taken over from a dead node, by what the tool's recovery found: its effect, or none. */
  const takeovers = { landed: 0, absent: 0 };
  // Both nodes announce the tool's start: a trial may kill the node while its tool runs.
  const nodes = new Map<string, Proc>();
  const started = new Set<(node: string, id: string) => void>();
  const restarting = new Map<string, Promise<void>>();
  let nodeKills = 0;
  const startNode = async (name: string) => {
    const node = await spawnProc(
      [fixture("mesh-node.ts"), name, nats.url, "effects", fixture("remote-effects.mjs")],
      (line) => {
        const match = /^started (\S+)$/.exec(line);
        if (match) for (const listener of [...started]) listener(name, match[1] as string);
        const recovered = /^recovered \S+ (landed|absent)$/.exec(line);
        if (recovered) takeovers[recovered[1] as "landed" | "absent"] += 1;
      },
    );
    nodes.set(name, node);
  };
  const killNode = (name: string) => {
    // A node still starting again after its last kill is left to start.
    if (restarting.has(name)) return;
    nodeKills += 1;
    nodes.get(name)?.child.kill("SIGKILL");
    restarting.set(
      name,
      startNode(name).finally(() => restarting.delete(name)),
    );
  };
  const waitForStart = () =>
    new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), 5000);
      const listener = (name: string) => {
        started.delete(listener);
        clearTimeout(timer);
        resolve(name);
      };
      started.add(listener);
    });
  return {
    takeovers,
    restarting,
    startNode,
    killNode,
    waitForStart,
    get nodeKills() {
      return nodeKills;
    },
  };
}

/** What the lanes share: the seeded draws, the nodes, the runs open and done, and what was counted. */
interface TrialState {
  readonly random: () => number;
  readonly pair: ReturnType<typeof nodePair>;
  readonly open: Set<string>;
  readonly done: Set<string>;
  readonly counts: { random: number; remote: number; window: number; node: number; windowAndNode: number };
  /** Steps re-run by a new driver whose effect had already landed: answered by the ledger, not run. */
  answeredRepeats: number;
}

/** Waits for the point a trial kills its driver at, killing a node too in some trials. */
async function waitForKillPoint(state: TrialState, driver: Proc): Promise<void> {
  const { random, counts, pair } = state;
  const draw = random();
  if (draw < 0.3) {
    counts.random += 1;
    await sleep(random() * 400);
  } else if (draw < 0.5) {
    // While its tool runs on a node.
    counts.remote += 1;
    await pair.waitForStart();
  } else if (draw < 0.75) {
    // Inside the crash window: the tool answered, the step's record is not durable yet.
    counts.window += 1;
    await driver.next(/^called /, 5000);
  } else if (draw < 0.88) {
    // The node running the tool dies before the tool's effect, then the driver.
    counts.node += 1;
    const node = await pair.waitForStart();
    if (node !== undefined) pair.killNode(node);
    await sleep(random() * 300);
  } else {
    // Inside the crash window, and the node that answered dies with the driver.
    counts.windowAndNode += 1;
    const called = await driver.next(/^called \S+ \d+ (\S+)$/, 5000);
    if (called?.[1] !== undefined) pair.killNode(called[1]);
  }
}

/** One lane: its own driver chain, journal and runs; lanes run side by side to use the time trials wait. */
async function lane(state: TrialState, name: string, kills: number): Promise<void> {
  const { open, done } = state;
  const storePath = join(directory, `${name}.sqlite`);
  let nextThread = 0;
  const mine = new Set<string>();
  const spawnDriver = () =>
    spawnProc([fixture("exactly-once-driver.ts"), storePath, nats.url, effectsFile], (line) => {
      const [word, thread, step, extra] = line.split(" ");
      if (word === "done" && thread !== undefined) {
        open.delete(thread);
        mine.delete(thread);
        done.add(thread);
      }
      if (word === "call" && Number(extra) > 1 && effectIds().has(`${thread}:${step}`))
        state.answeredRepeats += 1;
      if (word === "error" || word === "gave-up") process.stderr.write(`driver: ${line}\n`);
    });
  const follow = (driver: Proc, more: boolean) => {
    while (more && mine.size < 3) {
      const thread = `${name}-${nextThread++}`;
      mine.add(thread);
      open.add(thread);
    }
    for (const thread of mine) driver.send(`run ${thread}`);
  };
  // The next driver starts while this one works (a start is mostly compiling; a trial mostly waits).
  let spare = spawnDriver();
  let driver = await spawnDriver();
  follow(driver, true);
  for (let trial = 0; trial < kills; trial++) {
    await waitForKillPoint(state, driver);
    if (process.env.TACKLE_EXACTLY_ONCE_DEBUG)
      process.stderr.write(`${name} kill ${trial}: done ${done.size}\n`);
    driver.child.kill("SIGKILL");
    driver = await spare;
    spare = spawnDriver();
    follow(driver, true);
  }
  // No more kills: this driver finishes the lane's runs.
  follow(driver, false);
  const deadline = Date.now() + 180_000;
  while (mine.size > 0 && Date.now() < deadline) await sleep(200);
  (await spare).child.kill("SIGKILL");
}

/** Each finished step's effect is in the effects file once, and nothing else is. */
function assertEffectsOnce(state: TrialState): void {
  const { counts, done, pair } = state;
  const { takeovers } = pair;
  const lines = effectLines();
  const perStep = new Map<string, number>();
  for (const line of lines) {
    const id = line.split(" ")[0] as string;
    perStep.set(id, (perStep.get(id) ?? 0) + 1);
  }
  const duplicates = [...perStep].filter(([, count]) => count > 1);
  const expected = [...done].flatMap((thread) =>
    Array.from({ length: stepsPerRun }, (_, step) => `${thread}:${step}`),
  );
  process.stderr.write(
    `exactly once: ${trials} driver kills (${JSON.stringify(counts)}), ${pair.nodeKills} node kills, ${done.size} runs, ${lines.length} effects for ${expected.length} steps, ${duplicates.length} duplicates ${JSON.stringify(duplicates)}, ${state.answeredRepeats} steps re-run after their effect landed (answered by the ledger), ${takeovers.landed + takeovers.absent} keys taken over from a dead node (${takeovers.landed} whose effect had landed, answered by the tool's recovery; ${takeovers.absent} run there)\n`,
  );
  assert.deepEqual(duplicates, [], "no step's effect twice");
  assert.deepEqual([...perStep.keys()].sort(), expected.sort(), "each step's effect once, and no other");
  // The crash window was exercised: steps re-run by a new driver after their effect had landed.
  assert.ok(
    state.answeredRepeats >= trials / 10,
    `only ${state.answeredRepeats} steps re-run inside the crash window`,
  );
}

it(`${trials} driver kills (some with the serving node's): effects equal steps, 0 duplicates`, {
  timeout: 60 * 60_000,
}, async () => {
  let seed = 2029;
  const random = () => {
    seed = (seed * 16_807) % 2_147_483_647;
    return seed / 2_147_483_647;
  };
  const pair = nodePair();
  await Promise.all([pair.startNode("node-a"), pair.startNode("node-b")]);
  const state: TrialState = {
    random,
    pair,
    open: new Set(),
    done: new Set(),
    counts: { random: 0, remote: 0, window: 0, node: 0, windowAndNode: 0 },
    answeredRepeats: 0,
  };
  await Promise.all([lane(state, "a", Math.ceil(trials / 2)), lane(state, "b", Math.floor(trials / 2))]);
  await Promise.all([...pair.restarting.values()]);
  assert.deepEqual([...state.open], [], "every run finished");
  assertEffectsOnce(state);
});

function effectLines(): string[] {
  return existsSync(effectsFile) ? readFileSync(effectsFile, "utf8").split("\n").filter(Boolean) : [];
}

function effectIds(): Set<string> {
  if (!existsSync(effectsFile)) return new Set();
  return new Set(
    readFileSync(effectsFile, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split(" ")[0] as string),
  );
}
