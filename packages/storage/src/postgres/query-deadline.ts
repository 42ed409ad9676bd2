/**
 * pg's client-side query deadline (`query_timeout`) made safe for a pool (ADR 0574). pg answers a query
 * that outlived its deadline with `Query read timeout` but leaves the connection waiting for the answer
 * that never came: its next query queues behind it for ever, and a pool would hand it to the next
 * caller. Here such a connection is destroyed at once (the pool drops it on release) and the error is
 * a `StorageError` `query_timeout`, which `isTransientDatabaseError` accepts. A closed socket does not
 * stop the statement on the server, which runs until it answers: a slow statement retried after its
 * deadline would pile up copies, so its session is ended through the pool (`pg_terminate_backend`),
 * which also frees the locks it held. On a network that stopped delivering that cannot get through
 * either, and the server ends the session when it finds the connection gone.
 */
import type pg from "pg";
import { StorageError } from "../errors.ts";

type Callback = (error: unknown, result: unknown) => void;

const terminate = "SELECT pg_terminate_backend";

/** Makes `client`'s query deadline destroy the connection and raise `query_timeout`. */
export function guardQueryDeadline(client: pg.Client, label: string, pool: pg.Pool): void {
  const query = client.query as (...args: unknown[]) => unknown;
  const typed = (error: unknown): unknown => {
    if (!(error instanceof Error) || error.message !== "Query read timeout") return error;
    const internals = client as unknown as {
      connection?: { stream?: { destroy(): void } };
      _queryable?: boolean;
      processID?: number;
    };
    internals.connection?.stream?.destroy();
    const session = internals.processID;
    if (typeof session === "number") pool.query(`${terminate}($1)`, [session]).catch(() => undefined);
    // Unqueryable now, not once the socket's close is read: a release before then would hand it out.
    internals._queryable = false;
    return new StorageError(
      "query_timeout",
      `${label}: PostgreSQL did not answer within the query deadline (a network that stopped delivering, or a statement slower than queryTimeoutMs); the connection was closed, and the statement may have run`,
      {},
      { cause: error },
    );
  };
  const guarded = function (this: pg.Client, ...args: unknown[]): unknown {
    const last = args.at(-1);
    if (typeof last === "function") {
      args[args.length - 1] = (error: unknown, result: unknown) =>
        (last as Callback)(error ? typed(error) : error, result);
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    if (result instanceof Promise)
      return result.catch((error: unknown) => {
        throw typed(error);
      });
    return result;
  };
  client.query = guarded as typeof client.query;
}
