/** @tackle/docscript/server: the document server (Hono), its host and the SQLite store. */
export {
  type ChangeFacts,
  type ChangePage,
  type DocumentChange,
  defaultChangesLimit,
  maxChangesLimit,
  type RowCounts,
} from "./change-log.ts";
export { changedRows } from "./changed-rows.ts";
export {
  createDocumentServer,
  type DocumentServer,
  type DocumentServerOptions,
  USER_HEADER,
  VERSION_HEADER,
} from "./create-document-server.ts";
export { type Authorization, DocumentHost, type DocumentHostOptions, hashToken } from "./document-host.ts";
export {
  type AppendInput,
  type DocumentStore,
  type LoggedUpdate,
  StoreConflictError,
  type StoredDocument,
  type StoredHead,
} from "./document-store.ts";
export type { EntityPageQuery, RelationPageQuery } from "./page-answers.ts";
export type { PushResult } from "./push-result.ts";
export type { StageAnswer } from "./push-stage.ts";
export { type RunningDocumentServer, type ServeDocumentsOptions, serveDocuments } from "./serve-documents.ts";
export { createSqliteDocumentStore, type SqliteDocumentStoreOptions } from "./sqlite-document-store.ts";
