/**
 * Exactly once under an idempotency key when the node running the call dies (ADRs 0210, 0213), as a
 * property, on the real JetStream KV ledger: two node processes (`fixtures/node-process.ts`) serve
 * module `effects` on a real nats-server; each round fires 3–6 keys from three clients (1–3 sends per
 * key, a few ms apart), each key's run waiting 0–60 ms before its effect (a line appended, synchronously,
 * to the round's file) and 0–60 ms after it, and SIGKILLs one node 0–120 ms in: before some runs'
 * effects, between others' effects and their records, after others' answers. The node is started again
 * under its name at once, or only once the keys answered (the other node serves alone meanwhile); in a
 * quarter of the rounds the other node is killed too, 0–150 ms later, while the keys are taken over.
 * The callers send each key again, from any client, until it answers ok.
 *
 * The oracle is ADR 0213's guarantee, tool by tool. `apply` declares `recover` (it looks its key up in
 * the file): per key exactly one effect ever, and every ok answer is that effect's output. `blind`
 * declares nothing: a takeover runs it again, told so (its line says `takeover <node>`), so a key may
 * have another effect only where the one before it was made by a node that was then killed, and the
 * new one is a takeover of a killed node; every ok answer is the last effect's output. A first send
 * may fail `node_lost` (within its 3 s limit, scaled by the load: a node instance that died before
 * this client heard from it, while another node serves, is known from its announcement, ADR 0225), or
 * `unreachable` while no node serves; a send again only `node_lost` or retryably. After the last round
 * every key is asked once more: it answers the same and makes no new effect.
 *
 * By default 30 rounds (45–65 s on two busy cores); `TACKLE_PROPERTY_ROUNDS` sets the number, from seed
 * `TACKLE_PROPERTY_SEED` (default 213). The counts are printed. A ledger that takes a key over without
 * telling the tool (so `recover` is never asked) fails it in round 1.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, seededRandom, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, type MeshClient } from "../src/index.ts";
import { eventually, fixture, startPoolNode } from "./helpers.ts";
import { type Effect, parseEffects } from "./keyed-calls-support.ts";

const roundsGiven = process.env.TACKLE_PROPERTY_ROUNDS;
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 213);
const defaultRounds = 30;
/** A first send's time limit on a quiet machine, a send again's, and how long a key may take to answer ok after the kill. */
const firstMs = 3_000;
const sendMs = 10_000;
const settleMs = 45_000;
const nodeNames = ["node-a", "node-b"] as const;

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-kills-property-"));
let nats: NatsServerHandle;
/** Every node process started, for the cleanup; `serving` holds each name's current one. */
const children: ChildProcess[] = [];
const serving = new Map<string, Promise<ChildProcess>>();
const clients: MeshClient[] = [];

function startNode(name: string): Promise<ChildProcess> {
  // These nodes never blip, they die: a key is taken over once its node is unheard for 250 ms (the
  // default 2 s is a reconnecting node's grace, ADR 0228, tested in broker-faults.property.test.ts).
  const started = startPoolNode(
    name,
    nats.url,
    children,
    { module: "effects", path: fixture("effects.mjs") },
    250,
  );
  const child = started.then((node) => node.process);
  serving.set(name, child);
  return child;
}

before(async () => {
  nats = await startNatsServer();
  await Promise.all(nodeNames.map(startNode));
  for (let index = 0; index < 3; index++)
    clients.push(
      // A call held by the killed node fails node_lost about a second after the kill, not at its limit.
      await createMeshClient({
        servers: nats.url,
        timeoutMs: sendMs,
        nodeWatch: { probeMs: 100, lostAfterMs: 800 },
      }),
    );
  const [client] = clients as [MeshClient];
  await eventually("both nodes serve", async () => {
    const nodes = new Set<string>();
    for (let index = 0; index < 20; index++) {
      const result = await client.call("effects.apply", { file: join(directory, "warmup"), id: "w" });
      if (result.ok) nodes.add((result.output as { node: string }).node);
    }
    return nodes.size === nodeNames.length ? true : undefined;
  });
});
after(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  for (const client of clients) await client.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

type Tool = "apply" | "blind";

interface KeyPlan {
  readonly key: string;
  readonly tool: Tool;
  readonly args: {
    readonly file: string;
    readonly id: string;
    readonly ms: number;
    readonly msAfter: number;
  };
  /** The first sends: which client, how many ms into the round. */
  readonly sends: readonly { readonly client: number; readonly atMs: number }[];
  /** The clients that send the key again, in turn. */
  readonly againBy: readonly number[];
}

interface RoundPlan {
  readonly keys: readonly KeyPlan[];
  readonly victim: string;
  readonly killAtMs: number;
  /** Whether the killed node is started again at once, or only once the round's keys answered. */
  readonly restartAtOnce: boolean;
  /**
   * In some rounds the other node is killed too, this many ms after the first kill (before the first
   * is back: for a moment no node serves), while the keys are taken over; it is started again at once.
   */
  readonly secondKillAfterMs: number | undefined;
  /**
   * How long the round waits before its first sends, after the last round's restart: 0 now and then,
   * so a node instance no client has heard from yet takes calls and is killed (ADR 0225: they fail
   * `node_lost` all the same).
   */
  readonly waitMs: number;
}

/** Every draw of a round, made up front: the sends run at once and would draw in any order. */
function planRound(random: () => number, round: number, file: string): RoundPlan {
  const pick = (n: number) => Math.floor(random() * n);
  const keys = Array.from({ length: 3 + pick(4) }, (_, index): KeyPlan => {
    const key = `r${round}k${index}`;
    const tool: Tool = random() < 0.7 ? "apply" : "blind";
    const sends = Array.from({ length: 1 + pick(3) }, () => ({
      client: pick(clients.length),
      atMs: pick(41),
    }));
    const againBy = Array.from({ length: 4 }, () => pick(clients.length));
    return {
      key,
      tool,
      args: { file, id: `${key}-${tool}`, ms: pick(61), msAfter: pick(61) },
      sends,
      againBy,
    };
  });
  const victim = nodeNames[pick(nodeNames.length)] as string;
  const secondKillAfterMs = random() < 0.25 ? pick(151) : undefined;
  const restartAtOnce = secondKillAfterMs !== undefined || random() < 0.6;
  return {
    keys,
    victim,
    killAtMs: pick(121),
    restartAtOnce,
    secondKillAfterMs,
    waitMs: random() < 0.2 ? 0 : 400,
  };
}

/** A node killed in the round, and how many lines the round's file held once it was gone. */
interface Kill {
  readonly node: string;
  readonly made: number;
}

interface Answered {
  readonly key: string;
  /** A first send, or one sent again after the kill. */
  readonly first: boolean;
  readonly answer: ToolCallResult;
}

function send(plan: KeyPlan, client: number, timeoutMs = sendMs): Promise<ToolCallResult> {
  return (clients[client] as MeshClient).call(`effects.${plan.tool}`, plan.args, {
    idempotencyKey: plan.key,
    timeoutMs,
  });
}

/** Sends the key again, by its clients in turn, until it answers ok (or anything but a retry's cue). */
async function settle(plan: KeyPlan, answers: Answered[]): Promise<void> {
  const until = Date.now() + settleMs;
  for (let attempt = 0; Date.now() < until; attempt++) {
    const answer = await send(plan, plan.againBy[attempt % plan.againBy.length] as number);
    answers.push({ key: plan.key, first: false, answer });
    if (answer.ok || !(answer.error.code === "node_lost" || answer.error.retryable)) return;
    await delay(50);
  }
  assert.fail(`${plan.key} did not answer ok within ${settleMs} ms: ${JSON.stringify(answers.at(-1))}`);
}

/** SIGKILLs the node process and waits until it is gone. */
async function kill(child: ChildProcess, name: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<void>((resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${name} (pid ${child.pid}) runs 10 s after its SIGKILL`)),
      10_000,
    );
    child.once("exit", () => resolve());
  });
  child.kill("SIGKILL");
  await exited.finally(() => clearTimeout(timer));
}

function effectsIn(file: string): Effect[] {
  return existsSync(file) ? parseEffects(readFileSync(file, "utf8")) : [];
}

interface Counts {
  rounds: number;
  keys: number;
  sends: number;
  nodeLost: number;
  retried: number;
  /** Keys whose effect the killed node made before it died, a first send failing. */
  cutAfterEffect: number;
  /** Keys whose run a kill cut before its effect: their one effect was made by a takeover. */
  cutBeforeEffect: number;
  /** Takeovers whose tool ran (`takeover` lines), and those that found the effect by `recover`. */
  takeoverRuns: number;
  recovered: number;
  /** `blind` keys with a second effect: the window ADR 0213 leaves open for a tool without recovery. */
  blindTwice: number;
  restartedAtOnce: number;
  doubleKills: number;
}

/** What a key ended with, kept for the probe after the last round. */
interface Settled {
  readonly plan: KeyPlan;
  readonly lines: readonly Effect[];
  readonly output: unknown;
}

/**
 * The oracle for one key of a round (see the file's comment): a line after the key's first is a
 * takeover of a killed node, and the line before it was made by a node before it was killed.
 */
function checkKey(
  plan: KeyPlan,
  answers: readonly Answered[],
  effects: readonly Effect[],
  kills: readonly Kill[],
  counts: Counts,
): Settled {
  const indexed = effects
    .map((effect, index) => ({ effect, index }))
    .filter(({ effect }) => effect.key === plan.key);
  const lines = indexed.map(({ effect }) => effect);
  const mine = answers.filter((answered) => answered.key === plan.key);
  const killed = new Set(kills.map((kill) => kill.node));
  const why = `${plan.key} (seed ${seed}; ${plan.tool}, killed ${JSON.stringify(kills)}): effects ${JSON.stringify(indexed)}, answers ${JSON.stringify(mine)}`;
  assert.ok(lines.length >= 1, `answered without an effect: ${why}`);
  for (const line of lines) {
    assert.equal(line.id, plan.args.id, why);
    if (line.takeover !== undefined)
      assert.ok(killed.has(line.takeover), `a takeover of a node that lived: ${why}`);
  }
  if (plan.tool === "apply") assert.equal(lines.length, 1, `ran more than once: ${why}`);
  for (let at = 1; at < indexed.length; at++) {
    const { effect, index } = indexed[at - 1] as (typeof indexed)[0];
    const dead = kills.some((kill) => kill.node === effect.node && index < kill.made);
    assert.ok(dead, `ran again, not after the node that ran it died: ${why}`);
    assert.ok(indexed[at]?.effect.takeover !== undefined, `ran again, not told it took the key over: ${why}`);
  }
  if (lines.length > 1) counts.blindTwice += 1;
  const last = lines.at(-1) as Effect;
  const output = { id: last.id, node: last.node };
  for (const { first, answer } of mine) {
    if (answer.ok) assert.deepEqual(answer.output, output, `ok with another run's output: ${why}`);
    else if (first) {
      // No node served for a moment when both were killed: the call was refused before it ran.
      const expected = kills.length > 1 ? ["node_lost", "unreachable"] : ["node_lost"];
      assert.ok(expected.includes(answer.error.code), why);
    } else assert.ok(answer.error.code === "node_lost" || answer.error.retryable, why);
    if (!answer.ok && answer.error.code === "node_lost") counts.nodeLost += 1;
    if (!first) counts.retried += 1;
  }
  assert.ok(
    mine.some(({ answer }) => answer.ok),
    `no ok answer: ${why}`,
  );
  const cut = mine.some(({ first, answer }) => first && !answer.ok);
  const [earliest] = indexed;
  if (
    cut &&
    earliest !== undefined &&
    kills.some((kill) => kill.node === earliest.effect.node && earliest.index < kill.made)
  )
    counts.cutAfterEffect += 1;
  if (earliest?.effect.takeover !== undefined) counts.cutBeforeEffect += 1;
  counts.takeoverRuns += lines.filter((line) => line.takeover !== undefined).length;
  counts.keys += 1;
  counts.sends += mine.length;
  return { plan, lines, output };
}

/** One round: its first sends, the kill, the restart, every key sent again until ok, the oracle. */
async function round(index: number, random: () => number, counts: Counts, settled: Settled[]): Promise<void> {
  const file = join(directory, `round-${index}`);
  const plan = planRound(random, index, file);
  const answers: Answered[] = [];
  await delay(plan.waitMs);
  const firsts = plan.keys.flatMap((key) =>
    key.sends.map(async ({ client, atMs }) => {
      await delay(atMs);
      // The limit scales with the machine's load: node_lost comes about a second after the kill on a
      // quiet machine, later when the node watch's probes wait for a core (CI at load 12 passed 3 s).
      answers.push({ key: key.key, first: true, answer: await send(key, client, underLoadMs(firstMs)) });
    }),
  );
  await delay(plan.killAtMs);
  const kills: Kill[] = [];
  const killNode = async (name: string) => {
    await kill(await (serving.get(name) as Promise<ChildProcess>), name);
    kills.push({ node: name, made: effectsIn(file).length });
  };
  await killNode(plan.victim);
  if (plan.restartAtOnce) void startNode(plan.victim).catch(() => undefined);
  const settling = plan.keys.map((key) => settle(key, answers));
  const other = nodeNames.find((name) => name !== plan.victim) as string;
  if (plan.secondKillAfterMs !== undefined) {
    await delay(plan.secondKillAfterMs);
    await killNode(other);
    void startNode(other).catch(() => undefined);
  }
  await Promise.all([...firsts, ...settling]);
  if (!plan.restartAtOnce) void startNode(plan.victim).catch(() => undefined);
  await Promise.all(nodeNames.map((name) => serving.get(name)));
  const effects = effectsIn(file);
  for (const key of plan.keys) settled.push(checkKey(key, answers, effects, kills, counts));
  counts.doubleKills += kills.length > 1 ? 1 : 0;
  const recovered = `${file}.recovered`;
  if (existsSync(recovered))
    counts.recovered += readFileSync(recovered, "utf8").split("\n").filter(Boolean).length;
  counts.restartedAtOnce += plan.restartAtOnce ? 1 : 0;
  counts.rounds += 1;
}

it("a keyed call whose node is SIGKILLed mid-run, sent again, runs once (or, for a tool without recovery, again only as ADR 0213 says)", {
  timeout: 300_000,
}, async () => {
  const random = seededRandom(seed);
  const counts: Counts = {
    rounds: 0,
    keys: 0,
    sends: 0,
    nodeLost: 0,
    retried: 0,
    cutAfterEffect: 0,
    cutBeforeEffect: 0,
    takeoverRuns: 0,
    recovered: 0,
    blindTwice: 0,
    restartedAtOnce: 0,
    doubleKills: 0,
  };
  const settled: Settled[] = [];
  const rounds = roundsGiven === undefined ? defaultRounds : Number(roundsGiven);
  const started = performance.now();
  for (let index = 0; index < rounds; index++) await round(index, random, counts, settled);
  // Every key once more, after every kill and restart: the ledger answers it, the tool does not run.
  for (const { plan, lines, output } of settled) {
    const answer = await send(plan, 0);
    assert.deepEqual(answer, { ok: true, output }, `${plan.key} asked after the rounds (seed ${seed})`);
    const now = effectsIn(plan.args.file).filter((effect) => effect.key === plan.key);
    assert.deepEqual(now, lines, `${plan.key} ran again after the rounds (seed ${seed})`);
  }
  console.log(
    `keyed calls under kills: ${counts.rounds} rounds (${counts.restartedAtOnce} restarting the killed node at once, ${counts.doubleKills} killing both), ${counts.keys} keys, ${counts.sends} sends (${counts.retried} sent again; ${counts.nodeLost} node_lost); ${counts.cutAfterEffect} keys killed after their effect before their answer, ${counts.cutBeforeEffect} before their effect; ${counts.takeoverRuns} takeovers ran the tool, ${counts.recovered} found the effect by recover; ${counts.blindTwice} blind keys ran twice (takeover told); in ${Math.round(performance.now() - started)} ms (seed ${seed})`,
  );
  if (rounds >= defaultRounds)
    assert.ok(
      counts.cutAfterEffect > 0 &&
        counts.cutBeforeEffect > 0 &&
        counts.recovered > 0 &&
        counts.blindTwice > 0,
      "the kills hit every window",
    );
});
