/**
 * Exactly-once writes by Idempotency-Key under random concurrent retries, over real HTTP to two
 * `tackle-memory` service processes on one store: a SQLite file, and a PostgreSQL schema. Each round
 * draws adds, updates, deletes, event appends and imports, each under a key from a small pool so keys
 * collide, and sends them: once, as copies racing to both services, again while the first still runs
 * (a slow embedding), aborted by the client mid-request and retried, two different bodies racing on a
 * new key, a resend with a different body, and resends after the answer and after a restart of one
 * service. Against an oracle: a key's first body takes effect exactly once and every send of that body
 * answers the same answer (one of them not a replay); any other body under the key answers 422
 * `idempotency_key_reused` and changes nothing; at the end the memories and events the API lists are
 * the oracle's. `TACKLE_PROPERTY_ROUNDS` sets the rounds per store (default 2, of
 * `TACKLE_PROPERTY_STEPS`, default 14, steps), from seed `TACKLE_PROPERTY_SEED` (default 23);
 * `TACKLE_PROPERTY_STORES` (comma-separated, default `sqlite,postgres`) picks the stores, e.g. `postgres`
 * to hunt on PostgreSQL only.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";
import {
  type Answer,
  checkModel,
  type Model,
  read,
  ServicePair,
  send,
  type Write,
  writeMaker,
} from "./support/idempotent-writes.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 2);
const steps = Number(process.env.TACKLE_PROPERTY_STEPS ?? 14);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 23);
const stores = (process.env.TACKLE_PROPERTY_STORES ?? "sqlite,postgres").split(",");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A key of the round: the write that took effect under it and its first answer. */
interface Used {
  readonly write: Write;
  readonly answer: Answer;
  /** How many answers under the key were not replays (at most one, ever). */
  fresh: number;
}

interface Round {
  readonly random: () => number;
  readonly services: ServicePair;
  readonly model: Model;
  readonly keys: Map<string, Used>;
  readonly make: ReturnType<typeof writeMaker>;
  readonly log: string[];
}

const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const anyService = (round: Round) => round.services.url(Math.floor(round.random() * 2));

/**
 * Sends `write` under `key` in one of the ways a client retries: once; as 2 to 4 copies at once to
 * either service; once and again while the first still runs; or aborted mid-request and sent again.
 * Answers every answer the client got (an aborted request's, if it came first).
 */
async function sendAs(round: Round, write: Write, key: string): Promise<Answer[]> {
  const { random } = round;
  const how = pick(random, ["once", "copies", "while running", "aborted"] as const);
  round.log.push(`${how}: ${write.label} under ${key}`);
  if (how === "once") return [await send(anyService(round), write, key)];
  if (how === "copies") {
    const copies = 2 + Math.floor(random() * 3);
    return Promise.all(Array.from({ length: copies }, () => send(anyService(round), write, key)));
  }
  if (how === "while running") {
    const first = send(anyService(round), write, key);
    await sleep(20 + random() * 150);
    return Promise.all([first, send(anyService(round), write, key)]);
  }
  const controller = new AbortController();
  const aborted = send(anyService(round), write, key, controller.signal).catch((error: unknown) => {
    assert.equal((error as Error).name, "AbortError", String(error));
    return undefined;
  });
  await sleep(random() * 150);
  controller.abort();
  const first = await aborted;
  const retried = await send(anyService(round), write, key);
  return first === undefined ? [retried] : [first, retried];
}

const sameRequest = (one: Write, other: Write) =>
  `${one.method} ${one.path} ${JSON.stringify(one.body)}` ===
  `${other.method} ${other.path} ${JSON.stringify(other.body)}`;

/** Every answer to the key's own body is its first answer; at most one of them all is not a replay. */
function expectSame(used: Used, answers: Answer[], told: string) {
  for (const answer of answers) {
    assert.equal(answer.status, used.write.status, `${told}: ${JSON.stringify(answer.body)}`);
    assert.deepEqual(answer.body, used.answer.body, `${told}: another answer`);
    if (!answer.replayed) used.fresh += 1;
  }
  assert.ok(used.fresh <= 1, `${told}: ${used.fresh} answers were not replays`);
}

function expectReused(answers: Answer[], told: string) {
  for (const answer of answers) {
    assert.equal(answer.status, 422, `${told}: ${JSON.stringify(answer.body)}`);
    assert.equal((answer.body as { error?: { code?: string } }).error?.code, "idempotency_key_reused", told);
  }
}

/** A new key: one write sent as a client retries it, or two different bodies racing on it. */
async function firstUse(round: Round, key: string) {
  const { random, model, keys } = round;
  if (random() < 0.25) {
    const first = round.make.any();
    const second = round.make.any();
    // Two deletes of one memory are one request: the second body is then another one.
    const bodies = [first, sameRequest(first, second) ? round.make.independent() : second];
    round.log.push(`race under ${key}: ${bodies.map((write) => write.label).join(" | ")}`);
    const sends = bodies.flatMap((write, index) =>
      Array.from({ length: 1 + Math.floor(random() * 2) }, () =>
        send(anyService(round), write, key).then((answer) => ({ index, answer })),
      ),
    );
    const answers = await Promise.all(sends);
    const winners = new Set(answers.filter(({ answer }) => answer.status < 300).map(({ index }) => index));
    assert.equal(winners.size, 1, `race under ${key}: ${JSON.stringify(answers)}`);
    const winner = [...winners][0]!;
    const won = answers.filter(({ index }) => index === winner).map(({ answer }) => answer);
    const used: Used = { write: bodies[winner]!, answer: won[0]!, fresh: 0 };
    expectSame(used, won, `race under ${key}, winner`);
    expectReused(
      answers.filter(({ index }) => index !== winner).map(({ answer }) => answer),
      `race under ${key}, loser`,
    );
    used.write.apply(used.answer.body, model);
    keys.set(key, used);
    return;
  }
  const write = round.make.any();
  const answers = await sendAs(round, write, key);
  const used: Used = { write, answer: answers[0]!, fresh: 0 };
  expectSame(used, answers, `${write.label} under ${key}`);
  write.apply(used.answer.body, model);
  keys.set(key, used);
}

async function step(round: Round, key: string) {
  const used = round.keys.get(key);
  if (used === undefined) return firstUse(round, key);
  if (round.random() < 0.6) {
    expectSame(used, await sendAs(round, used.write, key), `resend of ${used.write.label} under ${key}`);
    return;
  }
  const drawn = round.make.any();
  const other = sameRequest(drawn, used.write) ? round.make.independent() : drawn;
  expectReused(await sendAs(round, other, key), `${other.label} under ${key}, used by ${used.write.label}`);
}

async function runRound(services: ServicePair, random: () => number, tag: string) {
  const userId = `u-${tag}`;
  const model: Model = { memories: new Map(), events: new Map(), episodes: [], jobs: [] };
  const round: Round = {
    random,
    services,
    model,
    keys: new Map(),
    make: writeMaker(random, userId, model, tag),
    log: [],
  };
  const pool = Array.from({ length: 4 }, (_, index) => `key-${tag}-${index}`);
  try {
    for (let index = 0; index < steps; index += 1) {
      if (random() < 0.12) {
        const which = Math.floor(random() * 2);
        round.log.push(`restart service ${which}`);
        await services.restart(which);
      }
      await step(round, pick(random, pool));
    }
    await checkModel(anyService(round), userId, model);
    // Every kept answer outlives the round's restarts: a last resend of each key answers it again.
    for (const [key, used] of round.keys)
      expectSame(used, [await send(anyService(round), used.write, key)], key);
  } catch (error) {
    const logs = services.logs().trim();
    throw new Error(`${tag} failed; its steps:\n${round.log.join("\n")}\nthe services' logs:\n${logs}`, {
      cause: error,
    });
  }
}

for (const kind of ["sqlite", "postgres"] as const) {
  if (!stores.includes(kind)) continue;
  describe(`idempotent writes under random retries, two services on ${kind}`, () => {
    let directory: string | undefined;
    let database: TestDatabase | undefined;
    let services: ServicePair | undefined;
    before(async () => {
      if (kind === "sqlite") {
        directory = mkdtempSync(join(tmpdir(), "tackle-memory-idempotent-"));
        services = await ServicePair.start(join(directory, "memory.db"));
      } else {
        database = await createTestDatabase("tackle_memory_idempotent");
        services = await ServicePair.start(database.url);
      }
    });
    after(async () => {
      await services?.close();
      await database?.drop();
      if (directory) rmSync(directory, { recursive: true, force: true });
    });

    it("each key's first body takes effect once; its resends answer its answer; other bodies are refused", async () => {
      const random = seededRandom(seed);
      for (let round = 0; round < rounds; round += 1) {
        try {
          await runRound(services!, random, `${kind}-${seed}-${round}`);
        } catch (error) {
          throw new Error(`round ${round} of seed ${seed} (TACKLE_PROPERTY_SEED) failed`, { cause: error });
        }
      }
      // Both services answer reads of the same store.
      await read(services!.url(0), "/v1/status");
      await read(services!.url(1), "/v1/status");
    });
  });
}
