/**
 * Sending a refused call again (ADRs 0120, 0536) on a virtual clock: 1,000 random schedules — retries allowed,
 * deadlines, each send's answer (429 with a Retry-After in seconds, a date, past the cap, unreadable or
 * none; a success; a 5xx), each send's round trip, late timers and an abort at a random moment — run
 * through `sendRefusedAgain` and checked against an oracle written apart from it, and against the
 * promises stated plainly: never more than `maxRetries + 1` sends, no send and no wait's end past the
 * deadline, nothing sent again after an answer that is not a 429, an abort ends a wait at once.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import {
  backoffCapMs,
  backoffInitialMs,
  checkedMaxRetries,
  type RetryClock,
  refusedRetryDelay,
  retryAfterCapMs,
  retryAfterMs,
  sendRefusedAgain,
} from "./retry-refused.ts";

const epoch = 1_700_000_000_000;

interface Schedule {
  readonly maxRetries: number;
  readonly deadline: number;
  /** Per send: its status and Retry-After. */
  readonly answers: readonly { readonly status: number; readonly retryAfter: string | null }[];
  readonly roundTripMs: readonly number[];
  readonly latenessMs: readonly number[];
  readonly abortAt: number | undefined;
}

interface Trace {
  readonly sends: number[];
  readonly waits: { at: number; ms: number }[];
  readonly outcome: { sent: number; status: number } | "aborted";
  readonly endedAt: number;
}

const abortedError = new Error("aborted");

function randomSchedule(random: () => number): Schedule {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const answers = Array.from({ length: 8 }, (_, index) => {
    const status = random() < 0.8 ? 429 : pick([200, 201, 500, 503]);
    const retryAfter = pick([
      null,
      "0",
      "1",
      String(Math.round(random() * 5)),
      (random() * 3).toFixed(2),
      "45",
      "not a number",
      new Date(epoch + index * 100 + Math.round(random() * 4000)).toUTCString(),
    ]);
    return { status, retryAfter };
  });
  return {
    maxRetries: Math.floor(random() * 7),
    deadline: random() < 0.15 ? Number.POSITIVE_INFINITY : Math.round(random() * 12_000),
    answers,
    roundTripMs: Array.from({ length: 8 }, () => Math.round(random() * 40)),
    latenessMs: Array.from({ length: 8 }, () => (random() < 0.7 ? 0 : Math.round(random() * 300))),
    abortAt: random() < 0.3 ? Math.round(random() * 8_000) : undefined,
  };
}

/** Runs `sendRefusedAgain` over the schedule on a virtual clock. */
async function run(schedule: Schedule, random: () => number): Promise<Trace> {
  let time = 0;
  const controller = new AbortController();
  const sends: number[] = [];
  const waits: { at: number; ms: number }[] = [];
  const clock: RetryClock = {
    now: () => time,
    epochMs: () => epoch + time,
    async sleep(ms, signal) {
      waits.push({ at: time, ms });
      const end = time + ms + (schedule.latenessMs[waits.length - 1] ?? 0);
      const abortAt = schedule.abortAt;
      if (abortAt !== undefined && abortAt >= time && abortAt < end && signal !== undefined) {
        time = abortAt;
        controller.abort();
      } else time = end;
    },
  };
  try {
    const { answer, sent } = await sendRefusedAgain(
      async () => {
        sends.push(time);
        const answer = schedule.answers[sends.length - 1] ?? { status: 200, retryAfter: null };
        time += schedule.roundTripMs[sends.length - 1] ?? 0;
        return answer;
      },
      {
        maxRetries: schedule.maxRetries,
        deadline: schedule.deadline,
        signal: controller.signal,
        clock,
        random,
        aborted: () => abortedError,
      },
    );
    return { sends, waits, outcome: { sent, status: answer.status }, endedAt: time };
  } catch (error) {
    assert.equal(error, abortedError);
    return { sends, waits, outcome: "aborted", endedAt: time };
  }
}

/** What should happen, worked out step by step from ADR 0120's rules (0536's are the same) (the same random draws). */
function oracle(schedule: Schedule, random: () => number): Trace {
  let time = 0;
  const sends: number[] = [];
  const waits: { at: number; ms: number }[] = [];
  for (;;) {
    sends.push(time);
    const answer = schedule.answers[sends.length - 1] ?? { status: 200, retryAfter: null };
    time += schedule.roundTripMs[sends.length - 1] ?? 0;
    const done = () => ({
      sends,
      waits,
      outcome: { sent: sends.length, status: answer.status },
      endedAt: time,
    });
    if (answer.status !== 429 || sends.length > schedule.maxRetries) return done();
    let asked: number | undefined;
    const header = answer.retryAfter;
    if (header !== null && /^[0-9.]+$/.test(header) && Number.isFinite(Number(header)))
      asked = Number(header) * 1000;
    else if (header !== null && /[a-z]/i.test(header) && !Number.isNaN(Date.parse(header)))
      asked = Math.max(0, Date.parse(header) - (epoch + time));
    if (asked !== undefined && asked > 30_000) return done();
    const top = Math.min(8_000, 500 * 2 ** (sends.length - 1));
    const wait = asked === undefined ? top / 2 + random() * (top / 2) : asked + random() * (asked / 4);
    if (time + wait > schedule.deadline - 1) return done();
    waits.push({ at: time, ms: wait });
    const end = time + wait + (schedule.latenessMs[waits.length - 1] ?? 0);
    if (schedule.abortAt !== undefined && schedule.abortAt >= time && schedule.abortAt < end)
      return { sends, waits, outcome: "aborted", endedAt: schedule.abortAt };
    time = end;
    if (schedule.deadline - time < 1) return done();
  }
}

it("sends a refused call again as the oracle says, never more than maxRetries + 1 times nor past its deadline (1,000 random schedules)", async () => {
  const seeds = seededRandom(0x0120);
  let retried = 0;
  let aborted = 0;
  let stoppedByDeadline = 0;
  for (let index = 0; index < 1_000; index += 1) {
    const seed = Math.floor(seeds() * 2 ** 32);
    const schedule = randomSchedule(seededRandom(seed));
    const trace = await run(schedule, seededRandom(seed + 1));
    const expected = oracle(schedule, seededRandom(seed + 1));
    const label = `seed ${seed}: ${JSON.stringify(schedule)}`;
    assert.deepEqual(trace, expected, label);

    assert.ok(trace.sends.length <= schedule.maxRetries + 1, `${label}: too many sends`);
    for (const at of trace.sends.slice(1))
      assert.ok(schedule.deadline - at >= 1, `${label}: a send at ${at} past the deadline`);
    for (const wait of trace.waits)
      assert.ok(wait.at + wait.ms <= schedule.deadline - 1, `${label}: a wait past the deadline`);
    // Nothing but a 429 is sent again.
    for (const [sent] of trace.sends.entries())
      if (sent < trace.sends.length - 1) assert.equal(schedule.answers[sent]?.status, 429, label);
    if (trace.outcome === "aborted") {
      aborted += 1;
      assert.equal(trace.endedAt, schedule.abortAt, `${label}: the abort ended the wait at once`);
    } else if (trace.outcome.status === 429 && trace.sends.length <= schedule.maxRetries)
      stoppedByDeadline += 1;
    if (trace.sends.length > 1) retried += 1;
  }
  // The schedules reach every way a call ends.
  assert.ok(
    retried > 300 && aborted > 25 && stoppedByDeadline > 100,
    `${retried} ${aborted} ${stoppedByDeadline}`,
  );
});

it("reads Retry-After as seconds or a date, honours it up to the cap, and backs off with equal jitter without it", () => {
  assert.equal(retryAfterMs("1", epoch), 1000);
  assert.equal(retryAfterMs(" 2.5 ", epoch), 2500);
  assert.equal(retryAfterMs(new Date(epoch + 3000).toUTCString(), epoch), 3000);
  assert.equal(retryAfterMs(new Date(epoch - 3000).toUTCString(), epoch), 0);
  for (const unreadable of [null, "", "soon", "-1"]) assert.equal(retryAfterMs(unreadable, epoch), undefined);

  const delay = (retry: number, retryAfter: string | null, draw: number, deadline = Infinity) =>
    refusedRetryDelay({
      maxRetries: 5,
      retry,
      retryAfter,
      now: 0,
      deadline,
      nowEpochMs: epoch,
      random: () => draw,
    });
  assert.equal(delay(1, "1", 0), 1000);
  assert.equal(delay(1, "1", 0.999_999), 1000 + 0.999_999 * 250);
  assert.equal(delay(1, String(retryAfterCapMs / 1000), 0), retryAfterCapMs);
  assert.equal(delay(1, String(retryAfterCapMs / 1000 + 1), 0), undefined, "past the cap: not sent sooner");
  assert.equal(delay(1, null, 0), backoffInitialMs / 2);
  assert.equal(delay(3, null, 1), backoffInitialMs * 4);
  assert.equal(delay(10, null, 1), undefined, "retries spent");
  assert.equal(
    refusedRetryDelay({
      maxRetries: 20,
      retry: 20,
      retryAfter: null,
      now: 0,
      deadline: Infinity,
      nowEpochMs: epoch,
      random: () => 1,
    }),
    backoffCapMs,
  );
  assert.equal(delay(1, "1", 0, 1001), 1000, "a wait that leaves 1 ms goes");
  assert.equal(delay(1, "1", 0, 1000.5), undefined, "a wait that leaves less does not");
  assert.throws(() => checkedMaxRetries(-1), RangeError);
  assert.throws(() => checkedMaxRetries(1.5), RangeError);
  assert.equal(checkedMaxRetries(undefined), 2);
  assert.equal(checkedMaxRetries(0), 0);
});
