/**
 * Where a projection's rows come from (ADR 0485): one interface whoever holds them. A source answers
 * row lookups (ADR 0466: rows by id, or the members a query finds, with the rows they live in) at one
 * version. The document server's store answers them straight (`storeRowSource`), a remote server over
 * HTTP (`client.rows`), and the tool's local replica holds every row already (its projection is read
 * whole: `projectDocument`). One projection (`OnDemandProjection`) reads from any of them.
 */
import type { RowRoot } from "../server/document-store.ts";
import type { PageCounts, RowLookup, RowLookupAnswer } from "../server/row-reads.ts";

export type { PageCounts, RowLookup, RowLookupAnswer };

/** What a source answers: the rows each lookup found; the kinds' counts at least when asked for none. */
export type RowSourceAnswer = Omit<RowLookupAnswer, "counts"> & { readonly counts?: PageCounts };

export interface RowSource {
  /** Rows by id, or the members each lookup finds, all at one version. */
  lookUp(lookups: readonly RowLookup[]): Promise<RowSourceAnswer>;
  /**
   * Every row of `root` after `after` in id order, at most `limit`: a source that offers it is read
   * whole row by row (a malformed row included); otherwise a whole read reads every member.
   */
  rowsAfter?(
    root: RowRoot,
    after: string | undefined,
    limit: number,
  ): Promise<readonly { readonly rowId: string; readonly json: unknown }[]>;
}

/** A function answering lookups, as the document client's `rows` does for one document. */
export type LookUpRows = (lookups: readonly RowLookup[]) => Promise<RowLookupAnswer>;

/** A source over a function answering lookups (a remote server, through the client or a host call). */
export function lookupRowSource(lookUp: LookUpRows): RowSource {
  return { lookUp };
}
