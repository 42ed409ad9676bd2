/**
 * Units of work on PostgreSQL: a unit holds one connection in a transaction; every store call made
 * inside it (its async context) runs there, and a method that is a transaction of its own becomes a
 * savepoint, one at a time.
 */
import type pg from "pg";
import type { MemoryStore } from "../memory-store.ts";
import { createUnitScope } from "../unit-scope.ts";
import type { PostgresUnit } from "./postgres-sql.ts";

export function createPostgresUnits(pool: pg.Pool) {
  const units = createUnitScope<PostgresUnit>();
  /** The unit's connection when the caller is in one, else the pool. */
  const db = (): pg.Pool | pg.PoolClient => units.active()?.client ?? pool;

  async function transaction<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const unit = units.active();
    if (unit !== undefined) {
      const step = unit.steps.then(async () => {
        const name = `step_${++unit.savepoints}`;
        await unit.client.query(`SAVEPOINT ${name}`);
        try {
          const result = await body(unit.client);
          await unit.client.query(`RELEASE SAVEPOINT ${name}`);
          return result;
        } catch (error) {
          await unit.client.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => undefined);
          throw error;
        }
      });
      unit.steps = step.catch(() => undefined);
      return step;
    }
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const result = await body(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  const unitOfWork: Pick<MemoryStore, "withTransaction" | "afterCommit"> = {
    async withTransaction(body) {
      if (units.active() !== undefined) return body();
      const client = await pool.connect();
      const unit: PostgresUnit = {
        client,
        done: false,
        afterCommit: [],
        steps: Promise.resolve(),
        savepoints: 0,
      };
      let committed = false;
      let broken: Error | undefined;
      try {
        await client.query("BEGIN");
        const result = await units.run(unit, body);
        await client.query("COMMIT");
        committed = true;
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch((rollbackError: unknown) => {
          broken = rollbackError as Error;
        });
        throw error;
      } finally {
        units.finish(unit, committed);
        // A connection whose rollback failed is broken: the pool drops it instead of reusing it.
        client.release(broken);
      }
    },

    afterCommit: units.afterCommit,
  };
  return { units, db, transaction, unitOfWork };
}
