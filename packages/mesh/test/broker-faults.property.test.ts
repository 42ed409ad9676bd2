/**
 * Exactly once under an idempotency key while the broker fails under the mesh at random moments, as a
 * property on real components (ADRs 0208, 0210, 0211, 0213, 0228): a nats-server of its own (JetStream, a
 * store kept across restarts), a TCP relay in front of it for the two nodes (module `effects`, its
 * results ledger in the JetStream KV) and another for the three clients. Each round fires the
 * keyed-calls property's calls (`keyed-calls-support.ts`: 4–12 at once over 1–3 fresh keys, repeats,
 * other arguments, retryable failures, calls without a key, aborts, limits of a few ms) and, 0–150 ms
 * in, 1–3 faults (`broker-faults-support.ts`): a relay cut (the parties reconnect), the answer lost to
 * a random publish the nodes or clients send (a claim, record or release in the KV, a KV read, a
 * node's reply, a call, a reconnect's handshake), a down window of 50–600 ms; in about one round in six the nats-server itself
 * is stopped (SIGKILL or SIGTERM) and started again on its port and store 0–500 ms later.
 *
 * The oracle: per key at most one effect; if a call under it answered ok, exactly one, and every ok
 * answer is that run's output; a call without a key runs at most once, and never after it answered
 * `not_delivered`; every answer comes within the call's limit (and a few seconds, scaled by the load),
 * never a thrown or raw NATS error, its code one the mesh documents for the case (`unavailable`,
 * `not_delivered`, `reply_lost`, `disconnected`, `node_lost`, `unreachable`, `no_responders`, or
 * where `checkError` allows it: `timeout` only to a short limit, `aborted` only to an aborted call).
 * Within 12 s (scaled by the load) of the round's last fault, each key asked again answers as the
 * keyed-calls oracle says (no key left `running` under a live node), and both nodes serve again (none
 * stuck disconnected, no subscription lost).
 *
 * By default 13 rounds (about a minute on two busy cores); `TACKLE_PROPERTY_ROUNDS` sets the number,
 * from seed `TACKLE_PROPERTY_SEED` (default 228). The counts are printed. It fails a ledger that
 * answers a repeat the cancel of a call whose release is pending (seed 7, round 6) and one that leaves
 * a claim whose answer was lost in the bucket (seed 228, round 8).
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import type { ToolCallResult } from "@tackle/core";
import {
  type NatsServerHandle,
  seededRandom,
  startNatsServer,
  startTcpRelay,
  type TcpRelay,
  underLoadMs,
} from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import {
  type Fault,
  faultJudge,
  patterns,
  planFaults,
  type Side,
  saysNotRun,
} from "./broker-faults-support.ts";
import { fixture, meshConfig } from "./helpers.ts";
import {
  type AnsweredCall,
  type Counts,
  checkRound,
  type Effect,
  newCounts,
  type PlannedCall,
  parseEffects,
  planRound,
  probe,
} from "./keyed-calls-support.ts";

const roundsGiven = process.env.TACKLE_PROPERTY_ROUNDS;
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 228);
const defaultRounds = 13;
/** A call's limit when the round gives it none; an answer may come this much after its limit. */
const callMs = 10_000;
const lateMs = 3_000;
/**
 * How long after the round's last fault every key answers its run and both nodes serve again (scaled
 * by the load): a party reconnects within its handshake bound (ADR 0228; nats.js alone stalled 20 s),
 * a key's end lands within the ledger's write retries, a call caught by the faults has answered.
 */
const healedMs = 12_000;

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-broker-faults-"));
let nats: NatsServerHandle;
const relays = {} as Record<Side, TcpRelay>;
const runtimes: NodeRuntime[] = [];
const clients: MeshClient[] = [];
/** The round whose lost answers are armed: a matcher of an earlier round never fires. */
let live = -1;

before(async () => {
  nats = await startNatsServer();
  relays.nodes = await startTcpRelay(nats.url);
  relays.clients = await startTcpRelay(nats.url);
  for (const node of ["node-a", "node-b"])
    runtimes.push(
      await startNodeRuntime({
        config: meshConfig(node, relays.nodes.url, [{ module: "effects", path: fixture("effects.mjs") }]),
      }),
    );
  for (let index = 0; index < 3; index++)
    clients.push(await createMeshClient({ servers: relays.clients.url, timeoutMs: callMs }));
  await bothServe("before the first round");
});
after(async () => {
  for (const client of clients) await client.close();
  for (const runtime of runtimes) await runtime.close();
  for (const relay of Object.values(relays)) await relay?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

function effectsIn(file: string): Effect[] {
  return existsSync(file) ? parseEffects(readFileSync(file, "utf8")) : [];
}

/** Calls without a key from every client until both nodes answered, within `healedMs` (scaled). */
async function bothServe(describe: string, until = Date.now() + underLoadMs(healedMs)): Promise<void> {
  const nodes = new Set<string>();
  const codes: string[] = [];
  for (let index = 0; Date.now() < until; index++) {
    const client = clients[index % clients.length] as MeshClient;
    const result = await client.call("effects.apply", { file: join(directory, "serving"), id: "s" });
    if (result.ok) nodes.add((result.output as { node: string }).node);
    else codes.push(result.error.code);
    if (nodes.size === runtimes.length && index >= clients.length) return;
    if (!result.ok) await delay(50);
  }
  assert.fail(`${describe}: both nodes did not serve again: served ${[...nodes]}, ${codes.slice(-5)}`);
}

/** One planned call, aborted by its caller at its moment if it is to be; it must answer by its limit. */
async function send(call: PlannedCall, describe: string): Promise<AnsweredCall> {
  const controller = new AbortController();
  const timer =
    call.abortAfterMs === undefined ? undefined : setTimeout(() => controller.abort(), call.abortAfterMs);
  const started = performance.now();
  try {
    const answer = await (clients[call.client] as MeshClient).call("effects.apply", call.args, {
      signal: controller.signal,
      ...(call.key === undefined ? {} : { idempotencyKey: call.key }),
      ...(call.timeoutMs === undefined ? {} : { timeoutMs: call.timeoutMs }),
    });
    const took = performance.now() - started;
    const limit = (call.timeoutMs ?? callMs) + underLoadMs(lateMs);
    assert.ok(took <= limit, `${describe}: answered after ${Math.round(took)} ms: ${JSON.stringify(answer)}`);
    return { ...call, answer };
  } finally {
    clearTimeout(timer);
  }
}

/** Makes one fault at its moment; resolves once it is over (a down window up, a restarted broker listening). */
async function makeFault(fault: Fault, round: number): Promise<void> {
  await delay(fault.atMs);
  if (fault.kind === "restart") {
    if (fault.kill) await nats.signal("SIGKILL");
    await nats.stop();
    await delay(fault.forMs);
    await nats.restart();
    return;
  }
  const relay = relays[fault.side];
  if (fault.kind === "cut") relay.cut();
  else if (fault.kind === "down") {
    relay.down();
    await delay(fault.forMs);
    relay.up();
  } else {
    const pattern = patterns[fault.side][fault.pattern] as RegExp;
    relay.loseAnswerTo((text) => live === round && pattern.test(text));
    // A handshake's answer is lost as the parties come back: cut them, so they come back now.
    if (fault.pattern === "connect") relay.cut();
  }
}

interface FaultCounts {
  readonly faults: Map<string, number>;
  readonly byCode: Map<string, number>;
  notRunChecked: number;
}

/** One round: its calls and faults at once, the oracle on the answers, each key probed, both nodes serving. */
async function round(index: number, random: () => number, counts: Counts, faultCounts: FaultCounts) {
  const file = join(directory, `round-${index}`);
  const calls = planRound(random, index, file, clients.length);
  const faults = planFaults(random);
  const describe = `round ${index} (seed ${seed}; faults ${JSON.stringify(faults)})`;
  live = index;
  // Healed by: `healedMs` (scaled) after the last fault was made, whatever the calls still wait for.
  const faulting = Promise.all(faults.map((fault) => makeFault(fault, index))).then(
    () => Date.now() + underLoadMs(healedMs),
  );
  const answered = await Promise.all(calls.map((call) => send(call, describe)));
  const healedBy = await faulting;
  live = -1;
  for (const fault of faults) {
    const name =
      fault.kind === "lose"
        ? `lose ${fault.side} ${fault.pattern}`
        : `${fault.kind} ${"side" in fault ? fault.side : ""}`;
    faultCounts.faults.set(name.trim(), (faultCounts.faults.get(name.trim()) ?? 0) + 1);
  }
  checkRound(answered, effectsIn(file), describe, counts, { judge: faultJudge(faultCounts.byCode) });
  const keys = new Set(calls.flatMap((call) => (call.key === undefined ? [] : [call.key])));
  for (const key of keys) {
    const site = { effectsIn, probeMs: Math.max(1, healedBy - Date.now()), call: probeCall };
    if (await probe(site, key, file, calls, describe)) counts.probesRan += 1;
  }
  await bothServe(describe, healedBy);
  // A call without a key that answered `not_delivered` never runs, however late (the probes took a while).
  const effects = effectsIn(file);
  for (const call of answered.filter((each) => each.key === undefined && saysNotRun(each))) {
    const lines = effects.filter((effect) => effect.id === call.args.id);
    assert.deepEqual(lines, [], `${describe}: ${call.args.id} ran after it answered not_delivered`);
    faultCounts.notRunChecked += 1;
  }
}

/** A probe's call: the first client's, under the key. */
function probeCall(args: PlannedCall["args"], key: string, timeoutMs: number): Promise<ToolCallResult> {
  return (clients[0] as MeshClient).call("effects.apply", args, { idempotencyKey: key, timeoutMs });
}

it("keyed calls run once, answer in time with documented codes, and the mesh serves again, whatever the broker does", {
  timeout: 600_000,
}, async () => {
  const random = seededRandom(seed);
  const counts = newCounts();
  const faultCounts: FaultCounts = { faults: new Map(), byCode: new Map(), notRunChecked: 0 };
  const rounds = roundsGiven === undefined ? defaultRounds : Number(roundsGiven);
  const started = performance.now();
  for (let index = 0; index < rounds; index++) await round(index, random, counts, faultCounts);
  const resets = relays.nodes.resets + relays.clients.resets;
  console.log(
    `broker faults: ${rounds} rounds, ${counts.calls} calls over ${counts.keys} keys (${counts.keysRunInRound} run in their round, ${counts.probesRan} by the probe after); faults ${JSON.stringify(Object.fromEntries(faultCounts.faults))}, ${resets} answers lost; answers: ${counts.ok} ok, ${counts.reused} idempotency_key_reused, ${counts.failed} unavailable (the fixture's), ${counts.aborted} aborted, ${counts.timedOut} timeout, fault codes ${JSON.stringify(Object.fromEntries(faultCounts.byCode))}; ${faultCounts.notRunChecked} not_delivered calls checked never to run; in ${Math.round(performance.now() - started)} ms (seed ${seed})`,
  );
  if (rounds >= defaultRounds)
    assert.ok(resets > 0 && counts.ok > 0, "the rounds lose answers and still answer ok");
});
