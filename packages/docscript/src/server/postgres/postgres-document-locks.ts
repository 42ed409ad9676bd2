/**
 * What servers sharing one PostgreSQL coordinate by: a document's advisory lock, held on a connection
 * of its own across a push, and LISTEN/NOTIFY on appends.
 */
import pg from "pg";

/** The channel an append notifies, with the document id as payload. */
export const APPENDS_CHANNEL = "docscript_appends";

export interface DocumentLocksOptions {
  /** The queries' pool (the lock and listen connections' too when no connection string is given). */
  readonly pool: pg.Pool;
  readonly connectionString?: string | undefined;
  readonly locks: { readonly pool: pg.Pool };
  readonly lockTimeoutMs: number;
  readonly onError?: ((error: Error) => void) | undefined;
}

export interface DocumentLocks {
  lockDocument(documentId: string): Promise<() => Promise<void>>;
  watchAppends(listener: (documentId: string) => void, missed?: () => void): Promise<() => Promise<void>>;
  /** Stops every watch. */
  stopWatches(): Promise<void>;
}

export function documentLocks(options: DocumentLocksOptions): DocumentLocks {
  const { pool, locks, lockTimeoutMs } = options;
  const stops = new Set<() => Promise<void>>();
  return {
    async lockDocument(documentId) {
      const client = await locks.pool.connect();
      try {
        await client.query("SELECT set_config('lock_timeout', $1, false)", [`${lockTimeoutMs}ms`]);
        // The wait is bounded by `lock_timeout`; the pool's query deadline (ADR 0574) must not cut it first.
        const lock = {
          text: "SELECT pg_advisory_lock(hashtext('docscript:' || $1))",
          values: [documentId],
          query_timeout: Math.min(lockTimeoutMs + 10_000, 2_147_483_647),
        };
        await client.query(lock);
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        try {
          await client.query("SELECT pg_advisory_unlock(hashtext('docscript:' || $1))", [documentId]);
          client.release();
        } catch (error) {
          // A connection that cannot unlock is closed, which releases the lock.
          client.release(error as Error);
        }
      };
    },
    async watchAppends(listener, missed) {
      let stopped = false;
      let current: pg.Client | undefined;
      let endCurrent: (error?: Error) => void = () => {};
      let retry: NodeJS.Timeout | undefined;
      const onNotification = (message: pg.Notification) => {
        if (message.channel === APPENDS_CHANNEL && message.payload !== undefined) listener(message.payload);
      };
      // A dedicated connection (a pooled one from a caller's pool otherwise); when it is lost, listen
      // again after a short wait, then tell `missed`: appends while it was lost went unannounced, and
      // a waiting reader woken reads them from the database (ADR 0489).
      let lost = false;
      const listen = async (): Promise<void> => {
        const pooled = options.connectionString === undefined;
        const next = pooled
          ? await pool.connect()
          : // Keep-alive and a connect deadline, as storage's pools have (ADR 0574): a reconnect on a
            // network that stopped delivering fails and is tried again instead of waiting for ever.
            new pg.Client({
              connectionString: options.connectionString,
              keepAlive: true,
              keepAliveInitialDelayMillis: 10_000,
              connectionTimeoutMillis: 10_000,
            });
        const end = (error?: Error) =>
          pooled ? (next as pg.PoolClient).release(error) : void next.end().catch(() => undefined);
        if (!pooled) await next.connect();
        next.on("notification", onNotification);
        next.on("error", (error: Error) => {
          options.onError?.(error);
          if (current !== next) return;
          current = undefined;
          lost = true;
          end(error);
          scheduleRetry(250);
        });
        try {
          await next.query(`LISTEN ${APPENDS_CHANNEL}`);
        } catch (error) {
          end(error as Error);
          throw error;
        }
        if (stopped) end();
        else {
          current = next;
          endCurrent = end;
          if (lost) {
            lost = false;
            missed?.();
          }
        }
      };
      const scheduleRetry = (afterMs: number) => {
        if (!stopped) retry = setTimeout(() => void listen().catch(() => scheduleRetry(1000)), afterMs);
      };
      await listen();
      const stop = async () => {
        stopped = true;
        clearTimeout(retry);
        const listening = current;
        current = undefined;
        if (listening === undefined) return;
        listening.off("notification", onNotification);
        endCurrent();
      };
      stops.add(stop);
      return async () => {
        stops.delete(stop);
        await stop();
      };
    },
    async stopWatches() {
      for (const stop of [...stops]) await stop();
      stops.clear();
    },
  };
}
