/**
 * The database fails under the service at random moments, as a property against an oracle on real
 * components: `tackle-memory serve` (its own process) on PostgreSQL through a TCP relay that loses the
 * answers to random statements after PostgreSQL did them (a `COMMIT`, an `INSERT`, an `UPDATE`, a
 * `SELECT … FOR UPDATE`, an advisory lock, a job claim, an idempotency key's row), cuts every
 * connection, and goes down for short windows. Meanwhile clients (`MemoryClient`, real HTTP) send
 * keyed and unkeyed adds, updates, deletes, feedback, events, imports (jobs), another body under a
 * used key, searches, lists and a purge of a second user; a client retries a 503 (or `409
 * idempotency_key_in_use`) under the same key, as the README tells users. Oracle: every answer is a
 * documented one for its route within a deadline (no 500, no hang); a keyed write that ends done is
 * stored once, its history too; a refused one never; an unkeyed one answered 503 at most once; a
 * search answered mid-faults reads the client's own writes; once the relay heals the service answers
 * within a bound, holds no advisory lock or open transaction, every import finishes with each turn
 * once, and the store (listed, histories, feedback, events) is the model, and the search through the
 * in-process snapshot (ADR 0541) answers what the store holds. `TACKLE_PROPERTY_ROUNDS` (default 4)
 * rounds of `TACKLE_PROPERTY_STEPS` (default 40) calls per worker, three workers, from seed
 * `TACKLE_PROPERTY_SEED` (default 570).
 */
import { after, before, describe, it } from "node:test";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import { FaultyService, seen, wordMaker } from "./support/postgres-faults.ts";
import { act, emptyModel, type Model, purgeUser, type Worker } from "./support/postgres-faults-model.ts";
import {
  eventsAreModel,
  jobsSucceeded,
  nothingHeld,
  recovery,
  searchIsStore,
  storeIsModel,
} from "./support/postgres-faults-oracle.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 4);
const steps = Number(process.env.TACKLE_PROPERTY_STEPS ?? 40);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 570);

interface Timings {
  readonly faultsMs: number;
  readonly recoveredMs: number;
  readonly jobsMs: number;
}

async function runRound(service: FaultyService, random: () => number, tag: string): Promise<Timings> {
  const model: Model = emptyModel(`u-${tag}`);
  const word = wordMaker(random);
  const workers: Worker[] = Array.from({ length: 3 }, (_, index) => ({
    name: `w${index}`,
    client: service.client(),
    service,
    random: seededRandom(Math.floor(random() * 2 ** 31)),
    word,
    model,
    log: service.log,
    keys: [],
    counter: 0,
  }));
  service.log.push(`round ${tag}`);
  const started = Date.now();
  service.startFaults(seededRandom(Math.floor(random() * 2 ** 31)));
  try {
    await Promise.all([
      ...workers.map(async (worker) => {
        for (let index = 0; index < steps; index += 1) await act(worker);
      }),
      purgeUser(workers[0]!, `${model.userId}-purged`),
    ]);
  } finally {
    await service.heal();
  }
  const faultsMs = Date.now() - started;
  const client = service.client();
  const recoveredMs = await recovery(client, model.userId);
  const healed = Date.now();
  await jobsSucceeded(client, service, model, faultsMs + underLoadMs(20_000));
  const jobsMs = Date.now() - healed;
  await nothingHeld(service);
  const listed = await storeIsModel(client, model);
  await eventsAreModel(client, model);
  await searchIsStore(client, model, listed);
  return { faultsMs, recoveredMs, jobsMs };
}

describe("the memory service while PostgreSQL fails under it at random moments", () => {
  let service: FaultyService | undefined;
  before(async () => {
    service = await FaultyService.start();
  });
  after(async () => {
    await service?.close();
  });

  it("does each acknowledged write once, no refused one, answers only documented errors, and serves again", async (t) => {
    const random = seededRandom(seed);
    for (let round = 0; round < rounds; round += 1) {
      const tag = `${seed}-${round}`;
      try {
        const { faultsMs, recoveredMs, jobsMs } = await runRound(service!, random, tag);
        const { resets, connections } = service!.relay;
        t.diagnostic(
          `round ${tag}: ${faultsMs} ms of faults; served again ${recoveredMs} ms after the heal, its imports done ${jobsMs} ms after; ${resets} answers lost so far, ${connections} connections; ${JSON.stringify(Object.fromEntries(seen))}`,
        );
      } catch (error) {
        const sessions = await service!.sessions().catch(String);
        throw new Error(
          `round ${round} of seed ${seed} (TACKLE_PROPERTY_SEED) failed\n${service!.logs()}\nsessions:\n${sessions}`,
          {
            cause: error,
          },
        );
      }
    }
  });
});
