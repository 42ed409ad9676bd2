/** What the SQLite store's files share: its connection's cached statements, parameter marks, access writes. */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { sqliteDialect, sqliteTransaction } from "@tackle/storage";
import type { AccessRecord } from "../memory-store.ts";
import { scopeParameters } from "../row-codec.ts";
import {
  chargeUsageSql,
  chargeUsageValues,
  checkUsage,
  type TenantUsage,
  type UsageLimits,
  usageFromRow,
} from "../tenant-usage.ts";

export type Row = Record<string, unknown>;

/** Prepared statements kept per store (texts vary with the length of IN lists; past this, all are dropped). */
const maximumCachedStatements = 256;

/** The SQL dialect (ADR 0008) for what differs from PostgreSQL: lists bound whole, the clock. */
export const dialect = sqliteDialect;

/**
 * Parameter `n`'s mark, numbered (`?n`, the dialect's `param`): the scope and filter conditions this
 * store composes name their parameters, so one condition text can run in several statements (a search
 * runs its filters with and without the match text, which stays parameter 1 in both).
 */
export const mark = (n: number) => dialect.param(n);

/** Binds `value` as the next parameter and returns its numbered mark. */
export function bind(parameters: unknown[], value: unknown): string {
  parameters.push(value);
  return mark(parameters.length);
}

/**
 * `column` is one of `values` through the dialect's `anyOf` (ADR 0008): the list bound whole, as JSON,
 * at the next parameter (numbered), so one prepared statement serves every length.
 */
export function oneOf(column: string, values: readonly (string | number)[], parameters: unknown[]): string {
  parameters.push(dialect.list(values));
  return dialect.anyOf(column, parameters.length);
}

/** The store's one connection and the statement helpers every aggregate's methods use. */
export interface SqliteContext {
  readonly database: DatabaseSync;
  readonly all: (sql: string, parameters: readonly unknown[]) => Row[];
  readonly get: (sql: string, parameters: readonly unknown[]) => Row | undefined;
  readonly run: (sql: string, parameters: readonly unknown[]) => ReturnType<StatementSync["run"]>;
  /** Synchronous: a savepoint inside an open transaction (a unit of work), else its own. */
  readonly transaction: <T>(body: () => T) => T;
}

export function createSqliteContext(database: DatabaseSync): SqliteContext {
  // Statements are prepared once per text: a search runs the same few statements many times (the
  // neighbouring-turn lookup two per anchor), and preparing one costs more than running it.
  const statements = new Map<string, StatementSync>();
  const prepare = (sql: string): StatementSync => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      if (statements.size >= maximumCachedStatements) statements.clear();
      statement = database.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
  return {
    database,
    all: (sql, parameters) => prepare(sql).all(...(parameters as SQLInputValue[])) as Row[],
    get: (sql, parameters) => prepare(sql).get(...(parameters as SQLInputValue[])) as Row | undefined,
    run: (sql, parameters) => prepare(sql).run(...(parameters as SQLInputValue[])),
    transaction: (body) => sqliteTransaction(database, body),
  };
}

/**
 * Records a search, hit or read: one more on the count of its day, kind, scope and memory (a search
 * names none: ''), and hits and reads counted on the memories (ADR 0537).
 */
export function writeAccess({ run }: SqliteContext, tenantId: string, access: AccessRecord) {
  const day = access.at.slice(0, 10);
  const scopeValues = scopeParameters(access.scope);
  const ids = access.memoryIds.length > 0 ? access.memoryIds : [""];
  for (const memoryId of ids) {
    // A search answered before a purge records its hits after it: a memory no longer stored gets no
    // row (a purge deletes its memories' access rows; one written after would outlive it, ADR 0559).
    run(
      `INSERT INTO memory_access_log (tenant_id, user_id, agent_id, session_id, scope_key, kind, memory_id, day, accesses)
       SELECT ?1, ?2, ?3, ?4, json_array(?2, ?3, ?4), ?5, ?6, ?7, 1
       WHERE ?6 = '' OR EXISTS (SELECT 1 FROM memory_memories WHERE tenant_id = ?1 AND id = ?6)
       ON CONFLICT (tenant_id, day, kind, scope_key, memory_id) DO UPDATE SET accesses = accesses + 1`,
      [tenantId, ...scopeValues, access.kind, memoryId, day],
    );
  }
  if (access.kind !== "search" && access.memoryIds.length > 0) {
    // `+tenant_id` keeps the planner on the id index (it otherwise walks the tenant's rows); the ids
    // bound as one list (the dialect's `anyOf`), so one prepared statement serves every count.
    run(
      `UPDATE memory_memories SET access_count = access_count + 1, last_accessed_at = ? WHERE +tenant_id = ? AND ${dialect.anyOf("id", 3)}`,
      [access.at, tenantId, dialect.list(access.memoryIds)],
    );
  }
}

const chargeSql = chargeUsageSql(mark);

/** Adds `delta` to the tenant's usage (inside the write's transaction); past `limits`, throws `quota_exceeded`. */
export function chargeUsage(
  { get }: SqliteContext,
  tenantId: string,
  delta: Partial<TenantUsage>,
  limits: UsageLimits | undefined,
): void {
  const after = usageFromRow(get(chargeSql, chargeUsageValues(tenantId, delta)));
  checkUsage(after, delta, limits);
}
