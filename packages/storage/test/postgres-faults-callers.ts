/**
 * The callers of `postgres-faults.property.test.ts`: migrators, transactions and plain queries that
 * retry what `isTransientDatabaseError` calls transient, each recording every answer it got for the
 * oracle.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isTransientDatabaseError, StorageError } from "@tackle/storage";
import { migratePostgres, type PostgresMigration, postgresTransaction } from "@tackle/storage/postgres";
import type pg from "pg";
import type { FaultTally, MigratorPlan, RoundPlan } from "./postgres-faults-support.ts";

/** Everything the callers saw, for the oracle. */
export interface CallLog {
  /** Answers the oracle refuses: an untyped or non-transient error, a call past its deadline. */
  readonly violations: string[];
  /** Errors seen and retried, by kind (`connection_lost`, `transient`, `lock_timeout`), and aborts. */
  readonly retried: FaultTally;
  /** Transaction ids whose transaction answered success. */
  readonly acknowledged: string[];
  /**
   * Transaction ids whose first and only attempt answered `aborted` ("rolled back"), or whose work
   * refused (it throws after its writes, every attempt): neither may have left anything.
   */
  readonly aborted: string[];
  /** The transient errors retried, by their innermost code or message. */
  readonly seen: FaultTally;
  /** Every `migratePostgres` call: its id and answer (`ok` with from and to, or the error's code and `found`). */
  readonly migrations: MigrationAttempt[];
}

export interface MigrationAttempt {
  readonly attempt: string;
  readonly answer: string;
  readonly from?: number | undefined;
  readonly to?: number | undefined;
  readonly found?: number | undefined;
}

export function newCallLog(): CallLog {
  return { violations: [], retried: {}, acknowledged: [], aborted: [], seen: {}, migrations: [] };
}

/** The migrations with each one's transaction marked as `attempt`'s (`fault.attempt`, read by its INSERT). */
function markedBy(attempt: string, migrations: readonly PostgresMigration[]): PostgresMigration[] {
  const mark = `SELECT set_config('fault.attempt', '${attempt}', true)`;
  return migrations.map((migration) => {
    const up = migration.up;
    return {
      ...migration,
      up:
        typeof up === "string"
          ? `${mark}; ${up}`
          : async (client: pg.ClientBase) => {
              await client.query(mark);
              await up(client);
            },
    };
  });
}

/** The innermost error's code, or the start of its message (`Connection terminated unexpectedly`). */
function errorSignature(error: unknown): string {
  let inner = error as { code?: unknown; message?: unknown; cause?: unknown };
  for (let depth = 0; depth < 8 && typeof inner.cause === "object" && inner.cause !== null; depth++)
    inner = inner.cause as typeof inner;
  return typeof inner.code === "string" ? inner.code : String(inner.message).slice(0, 48);
}

function describeError(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return `${String(code)}: ${String(message)}`;
}

/** `call`, or a violation when it has not settled within `deadlineMs` (it is still awaited). */
async function withinDeadline<T>(
  what: string,
  deadlineMs: number,
  log: CallLog,
  call: Promise<T>,
): Promise<T> {
  let settled = false;
  const watchdog = setTimeout(() => {
    if (!settled) log.violations.push(`${what}: no answer within ${deadlineMs} ms`);
  }, deadlineMs);
  try {
    return await call;
  } finally {
    settled = true;
    clearTimeout(watchdog);
  }
}

export interface CallerOptions {
  readonly log: CallLog;
  /** A single call's deadline: the connect deadline plus the longest lock wait, with room. */
  readonly callDeadlineMs: number;
  /** When retrying stops: the caller records a violation and gives up. */
  readonly giveUpAt: () => number;
  readonly random: () => number;
  /** The aborts of calls under way that have not fired yet. */
  readonly giveUps: Set<() => void>;
  /** The calls under way: what each is and when it started. */
  readonly inFlight: Set<{ readonly what: string; readonly started: number }>;
}

/**
 * A signal that aborts 0–20 ms from now in a quarter of the calls, else none; until then the fault
 * injector may abort it early (`giveUps`), as a COMMIT's answer is lost.
 */
function maybeAbort(options: CallerOptions): AbortSignal | undefined {
  if (options.random() >= 0.25) return undefined;
  const controller = new AbortController();
  const giveUp = () => {
    options.giveUps.delete(giveUp);
    controller.abort(new Error("the caller gave up"));
  };
  options.giveUps.add(giveUp);
  setTimeout(giveUp, Math.floor(options.random() * 20));
  return controller.signal;
}

/**
 * Runs `attempt` until it succeeds, retrying what `classify` names (a transient error); `final` ends
 * the calls with that answer; anything else is a violation. Answers how the calls ended.
 */
async function retrying(
  what: string,
  options: CallerOptions,
  attempt: (index: number) => Promise<void>,
  classify: (error: unknown, index: number) => string | undefined,
): Promise<"done" | "final" | "failed"> {
  const { log } = options;
  for (let index = 0; ; index++) {
    const call = { what, started: Date.now() };
    options.inFlight.add(call);
    try {
      await withinDeadline(what, options.callDeadlineMs, log, attempt(index));
      return "done";
    } catch (error) {
      const kind = classify(error, index);
      if (kind === undefined) {
        log.violations.push(`${what}: an answer outside the policy: ${describeError(error)}`);
        return "failed";
      }
      log.retried[kind] = (log.retried[kind] ?? 0) + 1;
      if (kind === "final") return "final";
      const signature = errorSignature(error);
      log.seen[signature] = (log.seen[signature] ?? 0) + 1;
    } finally {
      options.inFlight.delete(call);
    }
    if (Date.now() > options.giveUpAt()) {
      log.violations.push(`${what}: still failing transiently after the relay healed`);
      return "failed";
    }
    await sleep(2 + Math.floor(options.random() * 30));
  }
}

function isAborted(error: unknown): boolean {
  return StorageError.isInstance(error) && error.code === "aborted";
}

/**
 * What `migratePostgres` may answer under faults: a `StorageError`, transient by
 * `isTransientDatabaseError`: `connection_lost`, `query_timeout` (a stalled network: nothing
 * migrated), or `lock_timeout` with a short wait only (a generous
 * wait timing out means a lock outlived its holder); `aborted` only when its signal aborted (final).
 */
export function migrationErrorKind(
  error: unknown,
  shortWait: boolean,
  signalled: boolean,
): string | undefined {
  if (signalled && isAborted(error)) return "final";
  if (!StorageError.isInstance(error) || !isTransientDatabaseError(error)) return undefined;
  if (error.code === "connection_lost") return "connection_lost";
  if (error.code === "query_timeout") return "query_timeout";
  if (error.code === "lock_timeout" && shortWait) return "lock_timeout";
  return undefined;
}

function transientKind(error: unknown): string | undefined {
  return isTransientDatabaseError(error) ? "transient" : undefined;
}

export async function runMigrator(
  pool: pg.Pool,
  plan: RoundPlan,
  migratorIndex: number,
  options: CallerOptions & { readonly lockTimeoutMs: number },
): Promise<void> {
  const migrator = plan.migrators[migratorIndex] as MigratorPlan;
  const migrations = plan.migrations.slice(0, migrator.knows);
  const lockTimeoutMs = migrator.shortWait ? 5 + Math.floor(options.random() * 30) : options.lockTimeoutMs;
  const signals: (AbortSignal | undefined)[] = [];
  await retrying(
    `migrator of ${plan.store} (knows ${migrator.knows}, lock wait ${lockTimeoutMs} ms)`,
    options,
    async (index) => {
      const signal = maybeAbort(options);
      signals[index] = signal;
      const attempt = `${plan.store}.${migratorIndex}.${index}`;
      const marked = markedBy(attempt, migrations);
      try {
        const result = await migratePostgres(pool, {
          store: plan.store,
          migrations: marked,
          lockTimeoutMs,
          signal,
        });
        options.log.migrations.push({ attempt, answer: "ok", ...result });
        if (result.to !== migrator.knows)
          options.log.violations.push(`${plan.store}: migrated to ${result.to}, knows ${migrator.knows}`);
      } catch (error) {
        const { code, details } = error as { code?: unknown; details?: { found?: number } };
        options.log.migrations.push({ attempt, answer: String(code), found: details?.found });
        // Older code meeting a schema a newer migrator moved past: refused, a final answer.
        const tooNew = StorageError.isInstance(error) && error.code === "schema_too_new";
        if (!tooNew || (error.details.found ?? 0) <= migrator.knows) throw error;
      }
    },
    (error, index) => migrationErrorKind(error, migrator.shortWait, signals[index] !== undefined),
  );
}

/**
 * One caller's transactions, each under its own id: it takes a transaction-scoped advisory lock and
 * the counter's row `FOR UPDATE`, inserts its id (`ON CONFLICT DO NOTHING`: a retry after a lost
 * COMMIT finds its row) and, only when the row is new, bumps the counter and logs an effect. A retry
 * after an ambiguous failure is therefore safe, and a second effect shows. A first attempt may carry a
 * signal that aborts it: answered `aborted`, the transaction is not tried again and must have left
 * nothing; a tenth of the transactions refuse (the work throws after its writes), which rolls back.
 */
export async function runTransactions(
  pool: pg.Pool,
  plan: RoundPlan,
  caller: number,
  options: CallerOptions,
): Promise<void> {
  for (let index = 0; index < plan.transactions; index++) {
    const id = `${plan.store}:${caller}:${index}`;
    const signal = maybeAbort(options);
    const refuses = options.random() < 0.1;
    const ended = await retrying(
      `transaction ${id}`,
      options,
      (attempt) =>
        postgresTransaction(
          pool,
          async (client) => {
            await client.query("SELECT pg_advisory_xact_lock(572)");
            await client.query("SELECT n FROM fault_counter WHERE id = 1 FOR UPDATE");
            const inserted = await client.query(
              "INSERT INTO fault_ops (id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id",
              [id],
            );
            if (inserted.rowCount === 1) {
              await client.query("UPDATE fault_counter SET n = n + 1 WHERE id = 1");
              await client.query("INSERT INTO fault_effects (op) VALUES ($1)", [id]);
            }
            if (refuses) throw new Error("work refused");
          },
          { signal: attempt === 0 ? signal : undefined },
        ),
      (error, attempt) => {
        if (attempt === 0 && signal !== undefined && isAborted(error)) return "final";
        if (refuses && (error as Error).message === "work refused") return "final";
        return transientKind(error);
      },
    );
    if (ended === "failed") return;
    (ended === "done" ? options.log.acknowledged : options.log.aborted).push(id);
  }
}

/**
 * A plain pool query while the rest runs, on a pool of one connection that two callers share: each
 * holds it a little longer than the pool's connect deadline (`holdMs`), so the other, waiting for it,
 * times out (pg-pool's "timeout exceeded") and tries again.
 */
export async function runQueries(pool: pg.Pool, holdMs: number, options: CallerOptions): Promise<void> {
  const ended = await retrying(
    "a pool query",
    options,
    async () => {
      await pool.query("SELECT count(*), pg_sleep($1) FROM fault_ops", [holdMs / 1000]);
    },
    transientKind,
  );
  if (ended === "failed") options.log.violations.push("a pool query never answered");
}
