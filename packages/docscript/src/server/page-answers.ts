/**
 * What a document's stored rows answer without its Loro document (ADR 0466): pages of entities and of
 * relations, and row lookups, each with the document's head (version, issues) and totals.
 */
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentStore, MemberQuery } from "./document-store.ts";
import type { OpenDocuments } from "./open-documents.ts";
import { relationOf } from "./row-members.ts";
import {
  assembledEntities,
  type EntityPage,
  firstClaims,
  lookUpRows,
  type RelationPage,
  type RowLookup,
  type RowLookupAnswer,
  totalsOf,
} from "./row-reads.ts";

/** Where the answers are read: the store's rows, and the head of the document, open or not. */
export interface PageSources {
  readonly store: DocumentStore;
  readonly schema: Schema;
  readonly docs: Pick<OpenDocuments, "pageHead">;
}

export interface EntityPageQuery {
  readonly kinds?: readonly string[];
  readonly ids?: readonly string[];
  readonly after?: string;
  readonly limit: number;
}

export type RelationPageQuery = Omit<MemberQuery, "type" | "variantOf" | "identity">;

/** A page of entities in id order, by kinds and/or ids, after a cursor; variants with their base applied. */
export async function entityPageOf(
  { store, schema, docs }: PageSources,
  documentId: string,
  query: EntityPageQuery,
): Promise<EntityPage> {
  // The document is not loaded for a page: its rows, version and issues are the store's.
  const { version, issues } = await docs.pageHead(documentId);
  const found = await store.readMembers(documentId, {
    type: "entity",
    kinds: query.kinds,
    ids: query.ids,
    after: query.after,
    limit: query.limit,
  });
  const entities = await assembledEntities(store, schema, documentId, firstClaims(found));
  return { version, ...(await totalsOf(store, documentId)), entities, issues };
}

/** A page of relations in id order: by kinds, ids, an endpoint, after a cursor. */
export async function relationPageOf(
  { store, docs }: PageSources,
  documentId: string,
  query: RelationPageQuery,
): Promise<RelationPage> {
  const { version } = await docs.pageHead(documentId);
  const found = await store.readMembers(documentId, { ...query, type: "relation" });
  return {
    version,
    ...(await totalsOf(store, documentId)),
    relations: firstClaims(found).map(relationOf),
  };
}

/** Stored rows by id, or by the members a query finds, at the document's current version. */
export async function rowLookupOf(
  { store, docs }: PageSources,
  documentId: string,
  lookups: readonly RowLookup[],
  options: { issues?: boolean },
): Promise<RowLookupAnswer> {
  const { version, issues } = await docs.pageHead(documentId);
  const results = await lookUpRows(store, documentId, lookups);
  return {
    version,
    counts: (await totalsOf(store, documentId)).counts,
    ...(options.issues === true ? { issues } : {}),
    results,
  };
}
