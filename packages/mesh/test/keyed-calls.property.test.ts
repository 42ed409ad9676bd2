/**
 * Exactly once under an idempotency key (ADRs 0210, 0213) as a property, on the real JetStream KV
 * ledger: two nodes serve module `effects` (its `apply` appends `<id> <node> <key>` to a file per
 * run) on a real nats-server, and three mesh clients fire each round's 4–12 calls at once over a few
 * fresh keys — a key's own arguments repeated, other arguments under a used key, arguments that fail
 * retryably (a retryable failure frees the key), calls without a key, runs of 0–40 ms, some calls
 * aborted by their caller at a random moment, some with a time limit of a few ms. The oracle
 * (`keyed-calls-support.ts`): per key at most one effect; if a call under it answered ok, exactly one,
 * and every ok answer is that run's output; `idempotency_key_reused` only under a key that held other
 * arguments; every other code one the node and ledger may answer, and only to the calls it fits
 * (`unavailable` to the failing arguments, `aborted` to a call its caller aborted, `timeout` to a
 * call with a short limit). After the round each key is asked once more with its arguments: a key
 * with an effect answers that run's output and makes no new line; a key without one runs once now.
 *
 * By default it runs rounds until 3,000 calls were made (about 40 s); `TACKLE_PROPERTY_ROUNDS` sets the number of
 * rounds instead, from seed `TACKLE_PROPERTY_SEED` (default 210). The counts are printed.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, seededRandom, startNatsServer } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";
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
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 210);
const minimumCalls = 3_000;
/** How long a probe after a round may take, retrying retryable answers. */
const probeMs = 15_000;

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-keyed-property-"));
let nats: NatsServerHandle;
const runtimes: NodeRuntime[] = [];
const clients: MeshClient[] = [];

before(async () => {
  nats = await startNatsServer();
  for (const node of ["node-a", "node-b"])
    runtimes.push(
      await startNodeRuntime({
        config: meshConfig(node, nats.url, [{ module: "effects", path: fixture("effects.mjs") }]),
      }),
    );
  for (let index = 0; index < 3; index++)
    clients.push(await createMeshClient({ servers: nats.url, timeoutMs: 10_000 }));
  const [client] = clients as [MeshClient];
  await eventually("both nodes serve", async () => {
    const nodes = new Set<string>();
    for (let index = 0; index < 20; index++) {
      const result = await client.call("effects.apply", { file: join(directory, "warmup"), id: "w" });
      if (result.ok) nodes.add((result.output as { node: string }).node);
    }
    return nodes.size === 2 ? true : undefined;
  });
});
after(async () => {
  for (const client of clients) await client.close();
  for (const runtime of runtimes) await runtime.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

function effectsIn(file: string): Effect[] {
  return existsSync(file) ? parseEffects(readFileSync(file, "utf8")) : [];
}

/** One planned call, aborted by its caller at its moment if it is to be. */
async function send(call: PlannedCall): Promise<AnsweredCall> {
  const controller = new AbortController();
  const timer =
    call.abortAfterMs === undefined ? undefined : setTimeout(() => controller.abort(), call.abortAfterMs);
  try {
    const answer = await (clients[call.client] as MeshClient).call("effects.apply", call.args, {
      signal: controller.signal,
      ...(call.key === undefined ? {} : { idempotencyKey: call.key }),
      ...(call.timeoutMs === undefined ? {} : { timeoutMs: call.timeoutMs }),
    });
    return { ...call, answer };
  } finally {
    clearTimeout(timer);
  }
}

/** A probe's call: the first client's, under the key. */
function probeCall(args: PlannedCall["args"], key: string, timeoutMs: number): Promise<ToolCallResult> {
  return (clients[0] as MeshClient).call("effects.apply", args, { idempotencyKey: key, timeoutMs });
}

/** One round: its calls at once, the oracle on their answers, then each key probed. */
async function round(index: number, random: () => number, counts: Counts): Promise<void> {
  const file = join(directory, `round-${index}`);
  const calls = planRound(random, index, file, clients.length);
  const describe = `round ${index} (seed ${seed})`;
  const answered = await Promise.all(calls.map(send));
  checkRound(answered, effectsIn(file), describe, counts);
  const keys = new Set(calls.flatMap((call) => (call.key === undefined ? [] : [call.key])));
  const site = { effectsIn, probeMs, call: probeCall };
  for (const key of keys) if (await probe(site, key, file, calls, describe)) counts.probesRan += 1;
}

it("calls under idempotency keys on two nodes run once, as an oracle says, on the real JetStream ledger", async () => {
  const random = seededRandom(seed);
  const counts = newCounts();
  const started = performance.now();
  const rounds = roundsGiven === undefined ? undefined : Number(roundsGiven);
  let index = 0;
  while (rounds === undefined ? counts.calls < minimumCalls : index < rounds) {
    await round(index, random, counts);
    index += 1;
  }
  console.log(
    `keyed calls: ${index} rounds, ${counts.calls} calls over ${counts.keys} keys (${counts.keysRunInRound} run in their round, ${counts.probesRan} by the probe after); answers: ${counts.ok} ok, ${counts.reused} idempotency_key_reused, ${counts.failed} unavailable, ${counts.aborted} aborted, ${counts.timedOut} timeout (${counts.stillRunning} still running); in ${Math.round(performance.now() - started)} ms (seed ${seed})`,
  );
  assert.ok(counts.reused > 0 && counts.aborted > 0 && counts.failed > 0, "the rounds exercise every case");
});
