/**
 * A node's call admission (ADR 0214) and the client's resend of its refusals (ADR 0215) as a property,
 * over a real nats-server: one node serves module `scripted` (its `act` waits as long as each call's
 * arguments say, may then compute without yielding, fails or ignores its signal when told, and records
 * every run) with its bounds made small (3 running, 5 waiting), and each round one client — one that
 * sends refusals again, or one that does not — fires a burst of 3–16 calls with time limits of 30–400
 * ms, some sent a moment apart, some aborted by their caller at a random moment, some under an
 * idempotency key. A spy on the node's own connection sees each send arrive as the node does (when,
 * in what order, with what limit) and each reply to it.
 *
 * The oracle (`call-admission-oracle.ts`): never more runs at once than the running bound; runs start
 * in the order their sends arrived; every send is answered exactly once; every call is answered by its
 * time limit (or its abort) plus a grace; a call runs at most once, and only one answered `ok`,
 * `tool_failed`, `timeout` (then stopped by its time limit) or `aborted` (then aborted by its caller)
 * ran — an `overloaded` one never did; a run starts before its caller's limit is spent on the node, and
 * one stopped by its limit was given at most what was left of it.
 *
 * By default 100 rounds (about 950 calls, 25–35 s on two busy cores); `TACKLE_PROPERTY_ROUNDS` sets
 * the number, from seed `TACKLE_PROPERTY_SEED` (default 214). The counts are printed.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, seededRandom, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import {
  type AnsweredCall,
  checkRound,
  type PlannedCall,
  type Recorded,
  type Spied,
  spyOn,
} from "./call-admission-oracle.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 100);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 214);
const bounds = { concurrent: 3, waiting: 5 } as const;

const recorded = (): Recorded => (globalThis as { meshScripted?: Recorded }).meshScripted as Recorded;

let nats: NatsServerHandle;
let runtime: NodeRuntime;
let resending: MeshClient;
let plain: MeshClient;
let nodeConnection: NatsConnection;
let spied: Spied;

before(async () => {
  nats = await startNatsServer();
  // The spy reads the node's own connection: it sees each send arrive when the node does.
  nodeConnection = await connect({ servers: nats.url });
  spied = spyOn(nodeConnection, "tackle.tools.scripted.act");
  runtime = await startNodeRuntime({
    config: meshConfig("node-p", nats.url, [{ module: "scripted", path: fixture("scripted.mjs") }]),
    connection: nodeConnection,
    calls: bounds,
  });
  // Sends refusals again without a budget across calls (ADR 0216): each call alone is bounded.
  resending = await createMeshClient({ servers: nats.url, retryOverloaded: { budget: false } });
  plain = await createMeshClient({ servers: nats.url, retryOverloaded: false });
  for (const client of [resending, plain]) {
    const warm = await client.call("scripted.act", { key: "warm", ms: 0 });
    assert.equal(warm.ok, true, "the module serves");
  }
});
after(async () => {
  await resending?.close();
  await plain?.close();
  await runtime?.close();
  await nodeConnection?.close();
  await nats?.close();
});

function planRound(round: number, random: () => number): PlannedCall[] {
  const count = 3 + Math.floor(random() * 14);
  const calls: PlannedCall[] = [];
  for (let index = 0; index < count; index++) {
    const limitMs = 30 + Math.floor(random() * 370);
    calls.push({
      key: `r${round}-${index}`,
      ms: random() < 0.15 ? 0 : Math.floor(random() * 150),
      spinMs: random() < 0.15 ? 10 + Math.floor(random() * 70) : 0,
      limitMs,
      fail: random() < 0.1,
      ignoreCancel: random() < 0.15,
      abortAfterMs: random() < 0.25 ? Math.floor(random() * (limitMs + 50)) : undefined,
      idempotent: random() < 0.1,
      gapMs: random() < 0.8 ? 0 : Math.floor(random() * 40),
    });
  }
  return calls;
}

async function fire(client: MeshClient, planned: PlannedCall): Promise<AnsweredCall> {
  const aborter = new AbortController();
  const sentAt = performance.now();
  let abortedAt: number | undefined;
  const abortTimer =
    planned.abortAfterMs === undefined
      ? undefined
      : setTimeout(() => {
          abortedAt = performance.now();
          aborter.abort(new Error("the test's caller gave up"));
        }, planned.abortAfterMs);
  const { key, ms, spinMs, fail, ignoreCancel } = planned;
  const result = await client.call(
    "scripted.act",
    { key, ms, spinMs, ...(fail ? { fail } : {}), ...(ignoreCancel ? { ignoreCancel } : {}) },
    {
      timeoutMs: planned.limitMs,
      signal: aborter.signal,
      ...(planned.idempotent ? { idempotencyKey: `idem-${key}` } : {}),
    },
  );
  const answeredAt = performance.now();
  clearTimeout(abortTimer);
  return { planned, sentAt, answeredAt, abortedAt, result };
}

it("admits a flood of calls within the node's bounds, in order, answering each once in time", async () => {
  const random = seededRandom(seed);
  const quietGraceMs = underLoadMs(400);
  const slackMs = underLoadMs(10);
  const codes = new Map<string, number>();
  let calls = 0;
  let runs = 0;
  let latePastLimit = Number.NEGATIVE_INFINITY;
  const started = performance.now();
  for (let round = 0; round < rounds; round++) {
    const client = random() < 0.7 ? resending : plain;
    const planned = planRound(round, random);
    const firstSend = spied.sends.length;
    const firstRun = recorded().runs.length;
    const answers: Promise<AnsweredCall>[] = [];
    for (const call of planned) {
      if (call.gapMs > 0) await sleep(call.gapMs);
      answers.push(fire(client, call));
    }
    const answered = await Promise.all(answers);
    // Runs that ignore their signal end on their own; every send's reply has reached the spy.
    await eventually(
      `round ${round}: every run ended and every send answered`,
      async () => {
        const sends = spied.sends.slice(firstSend);
        const runsEnded = recorded()
          .runs.slice(firstRun)
          .every((run) => run.endedAt !== undefined);
        return runsEnded && sends.every((send) => spied.replies.has(send.reply)) ? true : undefined;
      },
      underLoadMs(5_000),
    );
    // A second answer to a send (a call answered, then run anyway) would come now.
    await sleep(20);
    const summary = checkRound({
      round,
      bounds,
      // A tool computing holds the event loop this whole process shares, the client's timers included.
      graceMs: quietGraceMs + planned.reduce((sum, call) => sum + call.spinMs, 0),
      slackMs,
      resends: client === resending,
      answered,
      sends: spied.sends.slice(firstSend),
      replies: spied.replies,
      runs: recorded().runs.slice(firstRun),
    });
    calls += answered.length;
    runs += summary.runs;
    latePastLimit = Math.max(latePastLimit, summary.latePastLimitMs);
    for (const call of answered) {
      const code = call.result.ok ? "ok" : call.result.error.code;
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
  }
  assert.ok(recorded().mostActive <= bounds.concurrent, "never more runs at once than the bound");
  console.log(
    `call admission: ${rounds} rounds, ${calls} calls, ${runs} runs, ${spied.sends.length} sends, most at once ${recorded().mostActive}, answers ${JSON.stringify(Object.fromEntries(codes))}, latest answer ${latePastLimit.toFixed(0)} ms past its limit, ${((performance.now() - started) / 1000).toFixed(1)} s (seed ${seed})`,
  );
  // The property's own reach: floods crossed both bounds and the answers covered every path.
  for (const code of ["ok", "overloaded", "timeout", "aborted", "tool_failed"])
    assert.ok(rounds < 20 || (codes.get(code) ?? 0) > 0, `no call was answered ${code}`);
});
