/** SQL helpers shared by the PostgreSQL store's files. */
import type pg from "pg";
import { memoryColumns } from "../row-codec.ts";
import type { Unit } from "../unit-scope.ts";

export type Row = Record<string, unknown>;

export interface PostgresUnit extends Unit {
  readonly client: pg.PoolClient;
  /** Savepoint steps run one after another on the unit's connection. */
  steps: Promise<unknown>;
  savepoints: number;
}
export const mark = (index: number) => `$${index}`;
export const memorySelect = ["seq", ...memoryColumns].map((column) => `m.${column}`).join(", ");
/** BM25's term-frequency saturation and length normalization, FTS5's defaults. */
export const bm25K1 = 1.2;
export const bm25B = 0.75;

export function marks(start: number, count: number): string {
  return Array.from({ length: count }, (_, index) => `$${start + index}`).join(", ");
}

export function inList(values: readonly unknown[], parameters: unknown[]): string {
  const start = parameters.length + 1;
  parameters.push(...values);
  return marks(start, values.length);
}

/**
 * The query's words with everything but letters and digits removed, so text handed to the store can
 * never become tsquery syntax (`&`, `!`, `:*`, `<->`, parentheses).
 */
export function plainWords(terms: readonly string[]): string[] {
  return terms.map((term) => term.replace(/[^\p{L}\p{N}]/gu, "")).filter(Boolean);
}

/** tsquery text: plain words ORed (ANDed with `every`); a term ending in `*` is a prefix (`:*`). */
export function tsQuery(terms: readonly string[], every = false): string {
  return terms
    .map((term) => {
      const word = term.replace(/[^\p{L}\p{N}]/gu, "");
      return word.length === 0 ? "" : term.endsWith("*") ? `${word}:*` : word;
    })
    .filter(Boolean)
    .join(every ? " & " : " | ");
}

/** Rows a multi-row insert writes at once (24 columns: well under the protocol's 65,535 parameters). */
export const insertChunk = 500;
export const historyColumns = [
  "tenant_id",
  "memory_id",
  "version",
  "change",
  "kind",
  "content",
  "metadata",
  "status",
  "importance",
  "reason",
  "at",
] as const;
