/**
 * The memory service fails under the middlewares at random moments, as a property against an oracle
 * on real components: the real service over real HTTP (a scratch SQLite file, two tenants) reached
 * only through a TCP relay (`startTcpRelay`) that cuts every connection, loses the answer to the next
 * request or to the next `POST /v1/events` / `POST /v1/context` after the service did it, goes
 * down for 20–920 ms, and (where the relay has `stall`) stalls, nothing closed and nothing through,
 * for up to 1.5 times a call's whole budget. Meanwhile an app runs six random conversations at once (six users over two
 * tenants, two session names each round, so users share a session id) through real AI SDK calls
 * (`generateText`, `streamText` via `withMemory`, one wrapped model per tenant so its bundle cache is
 * shared, some in `wake-up` mode so cached bundles are reused; the model is scripted: the AI SDK's
 * `MockLanguageModelV4`) and real OpenAI SDK calls (chat completions, streamed or not, and responses,
 * via `createOpenAIMiddleware`; the model is scripted: a loopback server speaking the OpenAI wire
 * format). The model itself fails some calls, and the app tries some turns again with the same
 * messages. Acme's middlewares hold each call until its capture ends (`awaitCapture`), globex's
 * capture in the background. Oracle (support/middleware-faults-oracle.ts): every call answers, or
 * fails with the model's own error, within `contextTimeoutMs` (+ `captureTimeoutMs` with
 * `awaitCapture`) plus slack; every failure is one `MemoryMiddlewareError` to `onError` and one log
 * line, both under its call; the model saw only its own user's memory, within the token budget; each
 * turn is stored at most once, exactly once when an attempt answered with no capture failure
 * reported, never when the model failed, never in another scope; once the relay heals, every user's
 * next calls inject and capture, and a turn whose context failed during the faults, asked again
 * (the same cache key), injects: a failure is not cached. `TACKLE_PROPERTY_ROUNDS` (default 3)
 * rounds, from seed `TACKLE_PROPERTY_SEED` (default 571).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import {
  type FaultyMemory,
  sleep,
  startFaultyMemory,
  TENANTS,
  type Tenant,
} from "./support/middleware-faults.ts";
import {
  awaitsCapture,
  type Callers,
  type History,
  orphanErrors,
  orphanLines,
  replyTo,
  startCallers,
  type Turn,
  type Via,
} from "./support/middleware-faults-callers.ts";
import { type Bounds, checkCall, checkCaptures } from "./support/middleware-faults-oracle.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 3);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 571);
const USERS = ["u0", "u1", "u2"];
const VIAS: readonly Via[] = ["generateText", "streamText", "chat", "chat-stream", "responses"];
const TOKEN_BUDGET = 120;

let memory: FaultyMemory;
let callers: Callers;
let contextTimeoutMs: number;
let captureTimeoutMs: number;
let calls = 0;

before(async () => {
  memory = await startFaultyMemory();
  for (const tenant of Object.keys(TENANTS) as Tenant[])
    for (const user of USERS) await memory.seed(tenant, user);
  contextTimeoutMs = underLoadMs(500);
  captureTimeoutMs = underLoadMs(1_200);
  callers = await startCallers(memory.relay.url, TENANTS, {
    contextTimeoutMs,
    captureTimeoutMs,
    bundle: { tokenBudget: TOKEN_BUDGET },
  });
});
after(async () => {
  await callers?.close();
  await memory?.close();
});

function newTurn(
  random: () => number,
  tenant: Tenant,
  user: string,
  session: string,
  history: readonly History[],
): Turn {
  const callId = `c${++calls}`;
  const via = VIAS[Math.floor(random() * VIAS.length)]!;
  return {
    callId,
    tenant,
    user,
    session,
    via,
    userText: `turn ${callId} from ${tenant}-${user}: what about tea?`,
    modelFails: via !== "streamText" && random() < 0.1,
    wakeUp: (via === "generateText" || via === "streamText") && random() < 0.6,
    history: [...history],
    errors: [],
    logged: [],
  };
}

/** The same call again (same messages, so the same capture key and query), as an app retries it. */
function retryOf(turn: Turn): Turn {
  const again: Turn = { ...turn, modelFails: false, errors: [], logged: [] };
  delete again.thrown;
  delete again.reply;
  return again;
}

/**
 * After the heal, turns whose context failed during the faults are asked again (the same query, the
 * same cache key): they inject, since a failed fetch is not cached (the cache's TTL is far longer
 * than this bound).
 */
async function failuresNotCached(turns: readonly Turn[], bounds: Bounds): Promise<Turn[]> {
  const failed = turns.filter(
    (turn) =>
      turn.thrown === undefined && turn.errors.some((error) => error.code === "memory_context_failed"),
  );
  const repeats: Turn[] = [];
  const boundMs = underLoadMs(5_000);
  const started = performance.now();
  for (const turn of failed.slice(0, 6)) {
    for (;;) {
      const again = retryOf(turn);
      await callers.call(again);
      repeats.push(again);
      checkCall(again, bounds);
      if (again.saw!.includes(`${turn.tenant}-${turn.user}`) && again.errors.length === 0) break;
      assert.ok(
        performance.now() - started < boundMs,
        `${turn.callId} (${turn.via}${turn.wakeUp ? ", wake-up" : ""}) still without memory ${Math.round(performance.now() - started)} ms after the heal: ${again.errors.map((error) => error.message)}`,
      );
    }
  }
  return repeats;
}

/** One conversation: turns in order; a failed turn is tried again, a good one sometimes too. */
async function converse(
  random: () => number,
  tenant: Tenant,
  user: string,
  session: string,
): Promise<Turn[]> {
  const turns: Turn[] = [];
  const history: History[] = [];
  const count = 2 + Math.floor(random() * 4);
  for (let index = 0; index < count; index++) {
    const turn = newTurn(random, tenant, user, session, history);
    await callers.call(turn);
    turns.push(turn);
    if (turn.thrown !== undefined || random() < 0.15) {
      // The app tries the same turn again (same messages): its capture must not double.
      const again = retryOf(turn);
      await callers.call(again);
      turns.push(again);
    }
    const answered = turns.findLast(
      (attempt) => attempt.callId === turn.callId && attempt.thrown === undefined,
    );
    if (answered === undefined) continue;
    history.push({ role: "user", text: turn.userText }, { role: "assistant", text: replyTo(turn.userText) });
  }
  return turns;
}

/** Retries `check` until it passes or `withinMs` has gone by (then its last failure). */
async function eventually(check: () => Promise<void>, withinMs: number): Promise<void> {
  const until = performance.now() + withinMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (performance.now() > until) throw error;
      await sleep(50);
    }
  }
}

/** After the relay heals, every user's next calls inject its memory and capture its turn. */
async function recovers(random: () => number, tag: string, bounds: Bounds): Promise<void> {
  const boundMs = underLoadMs(5_000);
  const started = performance.now();
  for (const { tenant, user } of bounds.owners) {
    for (const via of ["generateText", "chat"] as const) {
      const tried: Turn[] = [];
      for (;;) {
        const fresh = newTurn(random, tenant, user, `heal-${tag}-${via}`, []);
        const turn: Turn = { ...fresh, via, modelFails: false, wakeUp: false };
        await callers.call(turn);
        tried.push(turn);
        checkCall(turn, bounds);
        // Every call asks its own query, so an injected block is a fresh fetch, never a cached one.
        if (turn.saw!.includes(`${tenant}-${user}`) && turn.errors.length === 0) {
          await eventually(() => checkCaptures(memory, tried), underLoadMs(2_000));
          break;
        }
        assert.ok(
          performance.now() - started < boundMs,
          `${tenant}/${user} ${via} still degraded ${Math.round(performance.now() - started)} ms after the heal: ${turn.errors.map((error) => error.message)} saw: ${turn.saw}`,
        );
      }
    }
  }
}

it("property: model calls with memory failing under them answer in time, inject only their own, capture once", async () => {
  const random = seededRandom(seed);
  const owners = (Object.keys(TENANTS) as Tenant[]).flatMap((tenant) =>
    USERS.map((user) => ({ tenant, user })),
  );
  const slackMs = underLoadMs(1_500);
  const bounds: Bounds = {
    // With `awaitCapture` the call also waits for its capture; without, only for its context.
    callMs: (turn) => contextTimeoutMs + (awaitsCapture(turn.tenant) ? captureTimeoutMs : 0) + slackMs,
    tokenBudget: TOKEN_BUDGET,
    owners,
  };
  for (let round = 0; round < rounds; round++) {
    const tag = `r${round}`;
    memory.log.push(`round ${tag}`);
    const stopFaults = memory.startFaults(
      seededRandom(Math.floor(random() * 2 ** 31)),
      1.5 * (contextTimeoutMs + captureTimeoutMs + slackMs),
    );
    let turns: Turn[];
    try {
      const conversations = Array.from({ length: 6 }, (_, index) => {
        const { tenant, user } = owners[Math.floor(random() * owners.length)]!;
        return converse(seededRandom(Math.floor(random() * 2 ** 31)), tenant, user, `${tag}-s${index % 2}`);
      });
      turns = (await Promise.all(conversations)).flat();
    } finally {
      await stopFaults();
    }
    const context = `seed ${seed} round ${tag}; relay: ${memory.log.slice(-40).join(", ")}`;
    // Background captures end (stored, or dropped and reported) within their budget.
    await sleep(captureTimeoutMs + underLoadMs(300));
    try {
      for (const turn of turns) checkCall(turn, bounds);
      await checkCaptures(memory, turns);
      assert.deepEqual(orphanErrors, [], "every failure was reported under its call");
      assert.deepEqual(orphanLines, [], "every log line was written under its call");
      await recovers(random, tag, bounds);
      const repeats = await failuresNotCached(turns, bounds);
      await eventually(
        () => checkCaptures(memory, [...turns, ...repeats]),
        captureTimeoutMs + underLoadMs(300),
      );
    } catch (error) {
      throw new Error(`${context}\n${(error as Error).message}`, { cause: error });
    }
  }
});
