/**
 * For postgres-faults.property.test.ts: `tackle-memory serve` on PostgreSQL behind a TCP relay that
 * breaks at random moments (answers lost after the server did the work, every connection cut, short
 * outages), and the client's side of a call: every answer a documented one for its route, and a
 * write retried under its key as the README tells users, until it is done or refused.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { MemoryClient, MemoryError } from "@tackle/memory";
import {
  createTestDatabase,
  freePort,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import pg from "pg";
import { killAllStarted, type Running, startService, stop } from "./service-process.ts";

export const pick = <T>(random: () => number, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)]!;

/** The statements a fault is drawn among: the answer to the next one that matches is lost. */
const statements: readonly [string, RegExp][] = [
  ["COMMIT", /COMMIT/],
  ["COMMIT", /COMMIT/],
  ["INSERT", /INSERT INTO/],
  ["UPDATE", /UPDATE memory_/],
  ["FOR UPDATE", /FOR UPDATE/],
  ["advisory lock", /pg_advisory/],
  ["job row", /memory_jobs/],
  ["job claim", /SKIP LOCKED/],
  ["job's outcome", /lease_until = NULL/],
  ["idempotency key", /idempotency/i],
  ["history", /memory_history/],
  ["SELECT", /SELECT/],
];

/** The service on the relay, a direct connection to its database, and the faults' switch. */
export class FaultyService {
  readonly log: string[] = [];
  #faulting = false;
  #injector: Promise<void> | undefined;
  #stderr = "";

  readonly database: TestDatabase;
  readonly relay: TcpRelay;
  readonly running: Running;
  readonly direct: pg.Client;

  private constructor(database: TestDatabase, relay: TcpRelay, running: Running, direct: pg.Client) {
    this.database = database;
    this.relay = relay;
    this.running = running;
    this.direct = direct;
    running.child.stderr?.on("data", (chunk) => {
      this.#stderr += String(chunk);
    });
  }

  static async start(): Promise<FaultyService> {
    const database = await createTestDatabase("tackle_memory_faults");
    const relay = await startTcpRelay(database.url);
    const port = await freePort();
    const running = await startService(["--store", relay.url, "--listen", `127.0.0.1:${port}`], {
      TACKLE_MEMORY_API_KEYS: "key-a=tenant-a",
    });
    const direct = new pg.Client({ connectionString: database.url });
    direct.on("error", () => undefined);
    await direct.connect();
    return new FaultyService(database, relay, running, direct);
  }

  get url(): string {
    return this.running.url;
  }

  /** A client that does not retry by itself: the caller sees every answer and retries as a user does. */
  client(): MemoryClient {
    return new MemoryClient({
      baseUrl: this.url,
      apiKey: "key-a",
      allowPrivateNetwork: true,
      maxRetries: 0,
      timeoutMs: underLoadMs(15_000),
    });
  }

  /** Starts breaking the relay at random moments until `heal`. */
  startFaults(random: () => number): void {
    this.#faulting = true;
    const relay = this.relay;
    // At most three losses wait for their statement at once: armed without a bound, they pile up on
    // statements few calls send, and a lone client's every attempt would then lose its answer.
    let pending = 0;
    const armed = (pattern: RegExp) => {
      pending += 1;
      return (text: string) => {
        if (!this.#faulting || !pattern.test(text)) return false;
        pending -= 1;
        return true;
      };
    };
    this.#injector = (async () => {
      while (this.#faulting) {
        await sleep(10 + random() * 120);
        if (!this.#faulting) return;
        const draw = random();
        if (draw < 0.65 && pending >= 3) continue;
        if (draw < 0.55) {
          const [name, pattern] = pick(random, statements);
          this.log.push(`lose the answer to ${name}`);
          relay.loseAnswerTo(armed(pattern));
        } else if (draw < 0.65) {
          this.log.push("lose the next answer");
          relay.loseAnswerTo(armed(/[\s\S]/));
        } else if (draw < 0.8) {
          this.log.push("cut");
          relay.cut();
        } else if (draw < 0.88) {
          const ms = 50 + random() * 400;
          this.log.push(`down for ${Math.round(ms)} ms`);
          relay.down();
          await sleep(ms);
          relay.up();
        }
      }
    })();
  }

  /** Stops the faults (the loss still armed can no longer match) and brings the network up. */
  async heal(): Promise<void> {
    this.#faulting = false;
    await this.#injector;
    this.relay.up();
  }

  /** The database's sessions and the locks they wait on, for a failed round's report. */
  async sessions(): Promise<string> {
    const { rows } = await this.direct.query(
      `SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS in_transaction, left(query, 160) AS query,
              pg_blocking_pids(pid) AS blocked_by
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.map((row) => JSON.stringify(row)).join("\n");
  }

  logs(): string {
    return `faults and unkeyed answers:\n${this.log.slice(-60).join("\n")}\nthe service's log (tail):\n${this.#stderr.slice(-6000)}`;
  }

  /** Sessions of the service's pool holding an advisory lock or idle inside a transaction. */
  async held(): Promise<{ advisory: number; idleInTransaction: number }> {
    const { rows } = await this.direct.query(
      `SELECT (SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE a.datname = current_database() AND l.locktype = 'advisory' AND a.pid <> pg_backend_pid())::int AS advisory,
              (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                AND state LIKE 'idle in transaction%')::int AS "idleInTransaction"`,
    );
    return rows[0] as { advisory: number; idleInTransaction: number };
  }

  async close(): Promise<void> {
    this.#faulting = false;
    await this.#injector;
    await stop(this.running, "SIGTERM");
    killAllStarted();
    await this.relay.close();
    await this.direct.end().catch(() => undefined);
    await this.database.drop();
  }
}

/**
 * The documented answers a call may get while the database fails under the service: `503
 * unavailable` (retryable), and for a write `409 idempotency_key_in_use` (a retry while the first
 * attempt still runs). Anything else — a 500, a lost connection to the service, a timeout — fails.
 */
export function expectDocumented(
  error: unknown,
  what: string,
  refusals: readonly string[] = [],
): MemoryError {
  assert.ok(MemoryError.isInstance(error), `${what}: not a MemoryError: ${String(error)}`);
  count(`${error.status} ${error.code}`);
  const transient =
    (error.status === 503 && error.code === "unavailable") ||
    (error.status === 409 && error.code === "idempotency_key_in_use");
  assert.ok(
    transient || refusals.includes(error.code),
    `${what}: ${error.status} ${error.code} ${error.message}`,
  );
  return error;
}

/** What the calls met, for the test's summary: answers by status and code. */
export const seen = new Map<string, number>();
const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);

export type Outcome<T> = { readonly ok: T } | { readonly refused: MemoryError };

/**
 * Sends a write under `key` and, as the README says, sends it again under the same key while it is
 * answered 503 or 409 `idempotency_key_in_use`, until it is done or refused, within a deadline;
 * `trail` gets each attempt's answer.
 */
export async function untilDone<T>(
  what: string,
  trail: string[],
  send: () => Promise<T>,
  refusals: readonly string[] = [],
): Promise<Outcome<T>> {
  const deadline = Date.now() + underLoadMs(30_000);
  for (let attempt = 0; ; attempt += 1) {
    try {
      const ok = await send();
      count(attempt === 0 ? "done at once" : "done after a retry");
      trail.push(`done${(ok as { replayed?: boolean }).replayed ? " (replayed)" : ""}`);
      return { ok };
    } catch (error) {
      const failed = expectDocumented(error, what, refusals);
      trail.push(`${failed.status} ${failed.code}`);
      if (!failed.retryable) return { refused: failed };
      assert.ok(
        Date.now() < deadline,
        `${what}: still ${failed.code} after ${attempt + 1} attempts: ${failed.message}`,
      );
      await sleep(10 + Math.random() * Math.min(400, 20 * 2 ** attempt));
    }
  }
}

/** One attempt of a read: its answer, or undefined when it was answered 503. */
export async function once<T>(what: string, send: () => Promise<T>): Promise<T | undefined> {
  try {
    return await send();
  } catch (error) {
    expectDocumented(error, what);
    return undefined;
  }
}

/** An add sent with no Idempotency-Key (raw HTTP: the client always sends one): its status and body. */
export async function unkeyedPost(
  url: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: "Bearer key-a", "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(underLoadMs(15_000)),
  });
  const text = await response.text();
  count(`unkeyed ${response.status}`);
  const parsed = JSON.parse(text) as Record<string, unknown>;
  const code = (parsed.error as { code?: string } | undefined)?.code;
  assert.ok(
    response.status === 200 || (response.status === 503 && code === "unavailable"),
    `unkeyed ${path}: ${response.status} ${text}`,
  );
  return { status: response.status, body: parsed };
}

/** Letters only, so the search's stemmer and tokenizer keep a word whole: a word of its own per call. */
export function wordMaker(random: () => number): () => string {
  const letters = "bcdfghjklmnprstvz";
  const vowels = "aeiou";
  const made = new Set<string>();
  return () => {
    for (;;) {
      let word = "";
      for (let index = 0; index < 4; index += 1)
        word += pick(random, [...letters]) + pick(random, [...vowels]);
      word += "x";
      if (!made.has(word)) {
        made.add(word);
        return word;
      }
    }
  };
}
