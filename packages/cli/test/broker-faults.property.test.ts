/**
 * The broker fails under the console and `tackle mcp` at random moments, as a property against an
 * oracle (broker-faults-oracle.ts) on real processes: a nats-server of its own behind two TCP relays,
 * `tackle serve` (the console, and the node of the `effects` module whose `apply` appends a line per
 * run) and `tackle mcp` over stdio, each on the broker through its own relay, and three MCP SDK
 * clients (a 2025 session and a session-less 2026-07-28 client over HTTP, the stdio one) calling
 * `effects.apply` at random — some slow, some cancelled by their client — and listing tools and
 * modules, while a relay (or both) cuts every connection, loses the answer to a call's request, a
 * node's reply, the node watch's question, a catalogue read, a reconnect's handshake or whatever comes
 * next, opens down windows of 0.6–3.5 s, and every fifth round restarts the nats-server on its port.
 * Whatever the faults: every request is answered once within the call's deadline, ok or a documented
 * coded error (never a raw message); a call said never to have run made no effect, one answered ok
 * made exactly one, none ran twice; `tackle.modules` asked in a down window names the broker within
 * 2 s; once the broker is back, every client's `tools/list` answers the same list and a fresh call
 * answers ok within a bounded time, and every place of the console's token and of `tackle mcp` takes
 * a call again (none kept by a call the faults ended); the console stays up and exits 0 on SIGTERM.
 * The MCP paths carry no idempotency key (a client cannot send one), so keyed calls are not part of
 * it. By default 12 rounds; `TACKLE_PROPERTY_ROUNDS` sets the number, `TACKLE_PROPERTY_SEED` repeats
 * a run (every random draw is made before the waits it sets).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { DEFAULT_TIMEOUT_MS } from "@tackle/core";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import { checkAnswer, checkEffects, type Settled } from "./broker-faults-oracle.ts";
import {
  type Answer,
  answerOf,
  type Cluster,
  maxInFlight,
  type NamedClient,
  startCluster,
} from "./broker-faults-support.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 12);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? Date.now() % 100_000);

type Random = () => number;
const pick = <T>(next: Random, items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;

let cluster: Cluster;
/** Each client's `tools/list` before any fault. */
const baseline = new Map<string, string[]>();

async function toolNames(named: NamedClient): Promise<string[]> {
  const { tools } = await named.client.listTools(undefined, { timeout: underLoadMs(10_000) });
  return tools.map((tool) => tool.name).sort();
}

before(async () => {
  cluster = await startCluster();
  for (const named of cluster.clients) baseline.set(named.name, await toolNames(named));
  for (const names of baseline.values()) assert.ok(names.includes("effects.apply"), names.join(", "));
});
after(async () => {
  await cluster?.close();
});

/** One `effects.apply` call through `named`, cancelled by its client after `abortMs` when given. */
async function apply(named: NamedClient, id: string, ms: number, step: string, abortMs?: number) {
  const controller = new AbortController();
  const timer = abortMs === undefined ? undefined : setTimeout(() => controller.abort(), abortMs);
  const startedAt = performance.now();
  let answer: Answer;
  try {
    const result = (await named.client.callTool(
      { name: "effects.apply", arguments: { file: cluster.effectsFile, id, ms } },
      // The call's own deadline is the mesh's default; past it (and the load's slack) it hung.
      { signal: controller.signal, timeout: DEFAULT_TIMEOUT_MS + underLoadMs(10_000) },
    )) as CallToolResult;
    answer = answerOf(result, id);
  } catch (error) {
    answer = controller.signal.aborted
      ? { kind: "aborted" }
      : { kind: "thrown", message: `threw instead of answering: ${error}` };
  } finally {
    clearTimeout(timer);
  }
  const settled: Settled = { id, client: named.name, step, answer, ms: performance.now() - startedAt };
  checkAnswer(settled);
  return settled;
}

const losses: readonly RegExp[] = [
  /PUB tackle\.tools\.effects\.apply/, // a call's request: the connection dies as anything comes back
  /PUB _INBOX/, // a node's reply (or any reply the process sends)
  /tools\.held/, // the node watch's question, or a node's answer to it
  /PING|PONG/,
  /\$JS\.API|\$KV\./, // a catalogue read (the membership and catalogue records in NATS KV)
  /^CONNECT /, // a reconnect's handshake
  /^SUB /, // the subscriptions a reconnect makes again
];

/**
 * One fault at a random moment of the round, on one relay or both; the broker is whole when it
 * resolves. Every random draw is made before the first wait, so a seed replays the same faults.
 */
function fault(next: Random, round: number): { kind: string; done: Promise<void> } {
  const delayMs = Math.floor(next() * 1000);
  const relays = pick(next, [[cluster.relay], [cluster.stdioRelay], [cluster.relay, cluster.stdioRelay]]);
  const kind =
    round % 5 === 4
      ? "restart"
      : pick(next, ["cut", "lose", "lose", "loseNext", "down", "down", "none"] as const);
  const lost = pick(next, losses);
  // Past 2.5 s the other process's node watch finds this one's node gone (node_lost).
  const downMs = 600 + Math.floor(next() * 2900);
  const restartMs = Math.floor(next() * 1000);
  const behind = cluster.clients.filter(({ name }) =>
    relays.includes(name === "stdio" ? cluster.stdioRelay : cluster.relay),
  );
  const prober = pick(next, behind);
  const done = (async () => {
    await sleep(delayMs);
    for (const relay of relays) {
      if (kind === "cut") relay.cut();
      if (kind === "lose") relay.loseAnswerTo(lost);
      if (kind === "loseNext") relay.loseNextAnswer();
      if (kind === "down") relay.down();
    }
    if (kind === "down") {
      const probe = listedWhileDown(prober);
      await sleep(downMs);
      for (const relay of relays) relay.up();
      await probe;
    }
    if (kind === "restart") {
      await cluster.nats.stop();
      await sleep(restartMs);
      await cluster.nats.restart();
    }
  })();
  return { kind, done };
}

/**
 * With its broker unreachable, a client's `tackle.modules` answers within 2 s, naming the broker
 * (README, "The console"): asked 300 ms into a down window, through a client behind a relay that is down.
 */
async function listedWhileDown(named: NamedClient): Promise<void> {
  await sleep(300);
  const startedAt = performance.now();
  const result = (await named.client.callTool(
    { name: "tackle.modules", arguments: {} },
    { timeout: underLoadMs(10_000) },
  )) as CallToolResult;
  const ms = performance.now() - startedAt;
  assert.ok(
    ms < underLoadMs(2_000),
    `${named.name}: tackle.modules answered ${Math.round(ms)} ms into an outage`,
  );
  const { errors } = result.structuredContent as { errors: readonly { source: string }[] };
  assert.ok(
    errors.some(({ source }) => source.startsWith("broker ")),
    `${named.name}: tackle.modules named no broker error in an outage: ${JSON.stringify(result.structuredContent)}`,
  );
}

/** A listing at a random moment of the round: answered, whatever the broker does, within its bound. */
async function list(next: Random, step: string): Promise<void> {
  const delayMs = Math.floor(next() * 2000);
  const named = pick(next, cluster.clients);
  const tools = next() < 0.5;
  await sleep(delayMs);
  const startedAt = performance.now();
  try {
    if (tools) await toolNames(named);
    else {
      const result = (await named.client.callTool(
        { name: "tackle.modules", arguments: {} },
        { timeout: underLoadMs(10_000) },
      )) as CallToolResult;
      assert.notEqual(result.isError, true, JSON.stringify(result.content));
    }
  } catch (error) {
    const ms = Math.round(performance.now() - startedAt);
    assert.fail(`${named.name}: a listing failed after ${ms} ms (${step}): ${error}`);
  }
}

/** Every client lists the same tools and completes a fresh call, within a bound after the heal. */
async function recovers(settled: Settled[]): Promise<number> {
  const healedAt = performance.now();
  const boundMs = underLoadMs(20_000);
  for (const named of cluster.clients) {
    for (let attempt = 0; ; attempt += 1) {
      const waited = performance.now() - healedAt;
      assert.ok(waited < boundMs, `${named.name} not serving again ${Math.round(waited)} ms after the heal`);
      let names: string[] = [];
      try {
        names = await toolNames(named);
      } catch (error) {
        assert.fail(`${named.name}: tools/list threw after the heal: ${error}`);
      }
      const call = await apply(named, `heal-${named.name}-${attempt}`, 0, `seed ${seed} heal`);
      settled.push(call);
      if (call.answer.kind === "ok" && names.join() === baseline.get(named.name)?.join()) break;
      await sleep(250);
    }
  }
  // No place was kept by a call the faults ended: each bound holds as many calls as it did at the start.
  for (const name of ["session", "stdio"]) {
    const named = cluster.clients.find((client) => client.name === name) as NamedClient;
    const full = Array.from({ length: maxInFlight }, (_, index) =>
      apply(named, `full-${name}-${index}`, 300, `seed ${seed} every place after the heal`),
    );
    for (const call of await Promise.all(full)) {
      settled.push(call);
      assert.equal(call.answer.kind, "ok", `${call.id}: ${JSON.stringify(call.answer)}`);
    }
  }
  return performance.now() - healedAt;
}

test(`the console and tackle mcp under random broker faults (seed ${seed}, ${rounds} rounds)`, async () => {
  const next = seededRandom(seed);
  const settled: Settled[] = [];
  const faults: Record<string, number> = {};
  for (let round = 0; round < rounds; round += 1) {
    const step = `seed ${seed} round ${round}`;
    const calls = Array.from({ length: 2 + Math.floor(next() * 4) }, (_, index) => {
      const ms = Math.floor(next() * 1500);
      const abortMs = next() < 0.15 ? Math.floor(next() * ms) : undefined;
      return apply(pick(next, cluster.clients), `r${round}-${index}`, ms, step, abortMs);
    });
    const listing = list(next, step);
    const { kind, done } = fault(next, round);
    // Everything of the round ends before a failure is thrown: nothing of it outlives the test.
    const ended = await Promise.allSettled([done, listing, ...calls]);
    const failed = ended.find((outcome) => outcome.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    faults[kind] = (faults[kind] ?? 0) + 1;
    settled.push(...(await Promise.all(calls)));
    assert.equal(
      cluster.serve.child.exitCode,
      null,
      `the console exited (${step}): ${cluster.serve.stderr()}`,
    );
  }
  const recoveredMs = await recovers(settled);
  // Every call is answered; one answered `disconnected` or cancelled may still be running: let it end.
  await sleep(underLoadMs(2_000));
  checkEffects(settled, cluster.effects());
  const answers: Record<string, number> = {};
  for (const { answer } of settled) {
    const label = answer.kind === "error" ? answer.code : answer.kind;
    answers[label] = (answers[label] ?? 0) + 1;
  }
  const slowest = Math.round(Math.max(...settled.map(({ ms }) => ms)));
  console.log(
    `seed ${seed}: faults ${JSON.stringify(faults)}, answers ${JSON.stringify(answers)}, resets ${cluster.relay.resets}, slowest ${slowest} ms, serving again ${Math.round(recoveredMs)} ms after the heal`,
  );
  assert.doesNotMatch(cluster.serve.stderr(), /uncaught|unhandled/i);
  assert.equal(await cluster.serve.stop("SIGTERM"), 0, cluster.serve.stderr());
});
