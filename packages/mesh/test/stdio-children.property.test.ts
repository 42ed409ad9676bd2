/**
 * Bundles launched as stdio MCP children, as a property, with real child processes: each round runs a
 * chaos child (`fixtures/chaos-child.py`, or its JavaScript twin `chaos-child.mjs`) under a host — a
 * module's tool set (`loadModules`), or a node serving it over a real nats-server to a mesh client —
 * with a random cap of 2–8 calls in flight, for one or two phases, the host started afresh for each.
 * A phase fires 2–10 calls 0–400 ms apart with limits of 150–2,650 ms, some aborted by their caller;
 * each call's child answers after 0–600 ms, writes lines that are not JSON-RPC first, writes a line of
 * up to 3 MiB first or one past the SDK's 10 MiB buffer, exits, or never answers. Some phases SIGKILL
 * the child mid-call, make its next start hang in the handshake, SIGKILL the child and then its
 * restart 0–200 ms into the restart's handshake (ADR 0227), or close the tool-set host with calls in
 * flight.
 *
 * The oracle: every call answers once, by its limit (or its abort) plus a slack, with its own output
 * (the tag it sent) or a documented code — `timeout`, `aborted`, `child_exited` only where the child
 * may have died (a restart killed in its handshake included), `child_failed` only where a start hung
 * to its deadline (never for a restart killed in its handshake), `child_closed` only where the host
 * closed; in a phase with nothing but answers, a call with time for every call's wait answers ok.
 * After the phase a probe is answered by the child that started last (restarted after a death, a
 * restart killed in its handshake included), or `child_failed` exactly when a start hung; once the host closed, none of the child processes it started still runs.
 *
 * By default 8 rounds; `TACKLE_PROPERTY_ROUNDS` sets the number, from seed `TACKLE_PROPERTY_SEED`
 * (default 226). The counts are printed.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type NatsServerHandle, seededRandom, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, type MeshClient } from "../src/index.ts";
import {
  type Answered,
  type Host,
  isRunning,
  judge,
  killRestart,
  mayDie,
  type PhasePlan,
  planRound,
  type RoundPlan,
  readPids,
  startHost,
} from "./stdio-children-support.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 8);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 226);

let nats: NatsServerHandle;
let client: MeshClient;
const directory = mkdtempSync(join(tmpdir(), "tackle-stdio-children-property-"));
const counts = new Map<string, number>();
const count = (what: string) => counts.set(what, (counts.get(what) ?? 0) + 1);

before(async () => {
  nats = await startNatsServer();
  client = await createMeshClient({ servers: nats.url });
});
after(async () => {
  await client?.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

interface PhaseOutcome {
  readonly answered: Answered[];
  readonly closedEarly: boolean;
}

/** Fires the phase's calls, kill, hang flag and close as planned; resolves once every call answered. */
async function runPhase(host: Host, phase: PhasePlan, state: string): Promise<PhaseOutcome> {
  const answered: Answered[] = [];
  let lastPid: number | undefined;
  let closing: Promise<void> | undefined;
  const calls = phase.calls.map(async (call) => {
    await sleep(call.atMs);
    const controller = new AbortController();
    const abort =
      call.abortAfterMs === undefined ? undefined : setTimeout(() => controller.abort(), call.abortAfterMs);
    const sent = performance.now();
    const args = {
      tag: call.tag,
      ms: call.ms,
      do: call.action === "overflow" ? "huge" : call.action,
      size: call.size,
    };
    const result = await host.call(args, { timeoutMs: call.timeoutMs, signal: controller.signal });
    answered.push({ call, result, tookMs: Math.round(performance.now() - sent) });
    clearTimeout(abort);
    if (result.ok) lastPid = (result.output as { pid: number }).pid;
  });
  const events: Promise<void>[] = [];
  if (phase.killAtMs !== undefined) {
    events.push(
      sleep(phase.killAtMs).then(() => {
        // A child that answered a call; a restart killed in its handshake is the next event's.
        if (lastPid !== undefined && isRunning(lastPid)) process.kill(lastPid, "SIGKILL");
      }),
    );
  }
  if (phase.killStartAtMs !== undefined) {
    const afterMs = phase.killStartAfterMs ?? 0;
    events.push(
      sleep(phase.killStartAtMs)
        .then(() => killRestart(state, afterMs, underLoadMs(1_000)))
        .then((killed) => {
          count(killed ? "restart killed in its handshake" : "no restart to kill");
        }),
    );
  }
  if (phase.hangStartAtMs !== undefined) {
    events.push(sleep(phase.hangStartAtMs).then(() => writeFileSync(join(state, "hang-start"), "")));
  }
  if (phase.closeAtMs !== undefined) {
    events.push(
      sleep(phase.closeAtMs).then(() => {
        closing = host.close();
      }),
    );
  }
  await Promise.all([...calls, ...events]);
  await closing;
  return { answered, closedEarly: closing !== undefined };
}

/** After the phase: a call answered by the child that started last, or `child_failed` when a start hung. */
async function probe(host: Host, phase: PhasePlan, state: string, where: string): Promise<void> {
  const tag = `probe-${where}`;
  const ask = () =>
    host.call(
      { tag, ms: 0, do: "echo" },
      { timeoutMs: underLoadMs(15_000), signal: new AbortController().signal },
    );
  let result = await ask();
  // A call of the phase may still kill the child after the phase (an exit or a line past the SDK's
  // buffer, its caller gone): the probe sent to it fails with it, and a second goes to its successor.
  if (!result.ok && result.error.code === "child_exited" && mayDie(phase)) result = await ask();
  const flag = join(state, "hang-start");
  const hung = phase.hangStartAtMs !== undefined && !existsSync(flag);
  rmSync(flag, { force: true });
  count(`probe ${result.ok ? "ok" : result.error.code}`);
  if (hung) {
    assert.equal(
      result.ok ? "ok" : result.error.code,
      "child_failed",
      `${where}: a start hung, then the probe`,
    );
    return;
  }
  assert.ok(result.ok, `${where}: the probe answered ${JSON.stringify(result)}`);
  const { tag: answeredTag, pid } = result.output as { tag: string; pid: number };
  assert.equal(answeredTag, tag, `${where}: the probe got another call's answer`);
  assert.equal(pid, readPids(state).at(-1), `${where}: the probe is answered by the child started last`);
}

async function runRound(index: number, plan: RoundPlan): Promise<void> {
  for (const [phaseIndex, phase] of plan.phases.entries()) {
    const where = `round ${index} phase ${phaseIndex} (seed ${seed}; plan ${JSON.stringify({ ...plan, phases: undefined })} ${JSON.stringify(phase)})`;
    const state = mkdtempSync(join(directory, "child-"));
    const host = await startHost({ plan, directory: state, brokerUrl: nats.url, client });
    let outcome: PhaseOutcome | undefined;
    try {
      const slackMs = underLoadMs(1_500);
      outcome = await runPhase(host, phase, state);
      assert.equal(outcome.answered.length, phase.calls.length, `${where}: every call answered`);
      for (const answered of outcome.answered) {
        count(answered.result.ok ? "ok" : answered.result.error.code);
        const wrong = judge(answered, phase, slackMs, underLoadMs(1_500));
        assert.equal(wrong, undefined, `${where}: call ${JSON.stringify(answered.call)} ${wrong}`);
      }
      if (!outcome.closedEarly) await probe(host, phase, state, where);
    } finally {
      if (!outcome?.closedEarly) await host.close();
    }
    const pids = readPids(state);
    count(`${plan.host} host, ${plan.child} child`);
    counts.set("child processes", (counts.get("child processes") ?? 0) + pids.length);
    assert.deepEqual(
      pids.filter((pid) => isRunning(pid)),
      [],
      `${where}: child processes still running after the host closed (started: ${pids.join(", ")})`,
    );
  }
}

it("answers every call to a stdio child once, in time, with its own result or a documented error", async () => {
  const random = seededRandom(seed);
  const started = performance.now();
  for (let index = 0; index < rounds; index++) await runRound(index, planRound(index, random));
  console.log(
    `stdio children: ${rounds} rounds in ${Math.round(performance.now() - started)} ms (seed ${seed}): ${JSON.stringify(Object.fromEntries(counts))}`,
  );
});
