/** A document server per suite run, restartable over the same store, and what its suites compare. */
import assert from "node:assert/strict";
import type { LoroDoc } from "loro-crdt";
import { interpretDocument, timelineSchema } from "../src/index.ts";
import { type DocumentStore, type RunningDocumentServer, serveDocuments } from "../src/server/index.ts";
import { createEditor } from "./timeline-fixture.ts";

export interface StoreFactory {
  readonly name: string;
  /** A store over the same data each time it is called (a restart). */
  open(): Promise<DocumentStore>;
  cleanup(): Promise<void>;
}

export const adminToken = "admin-token-0123456789";

/** The suite's server: the current one (it changes on restart), and new documents on it. */
export interface SuiteServer {
  readonly factory: StoreFactory;
  readonly server: RunningDocumentServer;
  start(compactEvery?: number): Promise<void>;
  restart(compactEvery?: number): Promise<void>;
  newDocument(): Promise<{ documentId: string; token: string }>;
}

export function suiteServer(factory: StoreFactory): SuiteServer {
  let server: RunningDocumentServer | undefined;
  let counter = 0;
  const start = async (compactEvery = 100) => {
    server = await serveDocuments({
      store: await factory.open(),
      schema: timelineSchema,
      adminToken,
      compactEvery,
    });
  };
  const suite: SuiteServer = {
    factory,
    get server() {
      if (server === undefined) throw new Error("the suite's server has not started");
      return server;
    },
    start,
    async restart(compactEvery = 100) {
      await suite.server.close();
      await start(compactEvery);
    },
    async newDocument() {
      counter += 1;
      const documentId = `doc-${counter}`;
      const token = `token-${counter}-0123456789abcdef`;
      const admin = createEditor(suite.server.url, documentId, token, 1);
      assert.equal(await admin.client.createDocument(documentId, { adminToken, token }), true);
      return { documentId, token };
    },
  };
  return suite;
}

/** The entities and relations per kind the store counts, `type:kind` sorted. */
export async function storedCounts(
  store: DocumentStore,
  documentId: string,
): Promise<Record<string, number>> {
  const rows = await store.countMembers(documentId);
  return Object.fromEntries(rows.map((row) => [`${row.type}:${row.kind}`, row.count] as const).sort());
}

/** The entities and relations per kind a document projects to, keyed as `storedCounts`. */
export function countsOf(doc: LoroDoc): Record<string, number> {
  const view = interpretDocument(doc, timelineSchema);
  const counts = new Map<string, number>();
  const add = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  for (const entity of view.entities) add(`entity:${entity.entityKind}`);
  for (const relation of view.relations) add(`relation:${relation.relationKind}`);
  return Object.fromEntries([...counts].sort());
}

/** Every row the store keeps for a document, read a page of two at a time. */
export async function allStoredRows(store: DocumentStore, documentId: string) {
  const result = {
    entities: {} as Record<string, unknown>,
    relations: {} as Record<string, unknown>,
    versions: {} as Record<string, number>,
  };
  for (const root of ["entities", "relations"] as const) {
    let after: string | undefined;
    for (;;) {
      const page = await store.readRows(documentId, { root, after, limit: 2 });
      for (const row of page) {
        result[root][row.rowId] = row.json;
        result.versions[`${root}/${row.rowId}`] = row.version;
      }
      if (page.length < 2) break;
      after = page.at(-1)?.rowId;
    }
  }
  return result;
}
