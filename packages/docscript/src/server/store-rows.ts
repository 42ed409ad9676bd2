/**
 * The document server's store as a row source (ADR 0485): the lookups a tool asks over HTTP, answered
 * from the store's rows for the server's own projection of an open document. Its answers carry no
 * version (the caller checks the rows' seq after a fill) and the kinds' counts only when asked for none.
 */
import { type OnDemandProjection, onDemandProjection } from "../document/on-demand-projection.ts";
import type { RowSource } from "../document/row-source.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentStore } from "./document-store.ts";
import { lookUpRows, totalsOf } from "./row-reads.ts";

export function storeRowSource(store: DocumentStore, documentId: string): RowSource {
  return {
    async lookUp(lookups) {
      if (lookups.length === 0)
        return { version: "", counts: (await totalsOf(store, documentId)).counts, results: [] };
      return { version: "", results: await lookUpRows(store, documentId, lookups) };
    },
    async rowsAfter(root, after, limit) {
      return await store.readRows(documentId, { root, after, limit });
    },
  };
}

/**
 * The server's projection of an open document: only the rows its checks looked up, read from the
 * store on demand, never the whole document unless a check needs every row (ADR 0465).
 */
export function storeProjection(
  schema: Schema,
  store: DocumentStore,
  documentId: string,
): OnDemandProjection {
  return onDemandProjection(schema, storeRowSource(store, documentId), undefined, Number.POSITIVE_INFINITY, {
    speculative: false,
  });
}
