/** A real document server on loopback (SQLite in a temp dir), seeded with sample timelines, and a tool on it. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, type DocumentClient } from "../src/client/create-document-client.ts";
import { type InterpretedDocument, interpretDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { hashToken } from "../src/server/document-host.ts";
import type { RowChange } from "../src/server/document-store.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import {
  createDocScriptTool,
  type DocScriptTool,
  type DocScriptToolOptions,
} from "../src/tool/create-doc-script-tool.ts";

export const adminToken = "admin-token-for-tests-0123456789";
export const documentToken = "document-token-for-tests-0123456789";
/** The tool's credential: a host's, so the plans it records stored-file facts in are accepted. */
export const hostToken = "host-token-for-tests-0123456789";

export interface Harness {
  readonly server: RunningDocumentServer;
  /** A second, independent client (another user) reading and writing the same server. */
  readonly client: DocumentClient;
  createDocument(docId: string, extraClips?: number): Promise<void>;
  /**
   * Stores a document straight into the server's file with the rows given (as `createDocument` would
   * after reading it), for documents too large to read in a test's time.
   */
  storeDocument(docId: string, snapshot: Uint8Array, rows: readonly RowChange[]): Promise<void>;
  /** The document as the server has it now. */
  read(docId: string): Promise<InterpretedDocument>;
  tool(options?: Partial<DocScriptToolOptions>): DocScriptTool;
  close(): Promise<void>;
}

/**
 * The deadline of one request to the document server: the client's 30 s on a quiet machine, scaled by
 * the load. The server runs in the test's own process, so on a busy machine a large read (thousands of
 * rows) waits for a core on both ends; how long it takes is not what these tests check.
 */
const requestTimeoutMs = () => underLoadMs(30_000);

export async function startHarness(): Promise<Harness> {
  const directory = mkdtempSync(join(tmpdir(), "docscript-tool-"));
  const path = join(directory, "documents.sqlite");
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path }),
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
  });
  const client = createDocumentClient({
    origin: server.url,
    token: documentToken,
    userId: "another-user",
    timeoutMs: requestTimeoutMs(),
  });
  const tools: DocScriptTool[] = [];
  const createdIds = new Set<string>();
  return {
    server,
    client,
    async createDocument(docId, extraClips = 0) {
      const created = await client.createDocument(docId, {
        adminToken,
        token: documentToken,
        snapshot: sampleTimelineSnapshot({ extraClips }),
      });
      if (!created) throw new Error(`document ${docId} exists`);
      createdIds.add(docId);
    },
    async storeDocument(docId, snapshot, rows) {
      const store = createSqliteDocumentStore({ path });
      try {
        const created = await store.createDocument({
          documentId: docId,
          tokenHash: hashToken(documentToken),
          snapshot,
          rows,
          issues: [],
        });
        if (!created) throw new Error(`document ${docId} exists`);
        createdIds.add(docId);
      } finally {
        await store.close();
      }
    },
    async read(docId) {
      const doc = new LoroDoc();
      await client.pullInto(docId, doc);
      return interpretDocument(doc, timelineSchema);
    },
    tool(options = {}) {
      // The documents this harness created, unless the test says which a call may open.
      const access =
        options.documents === undefined && options.authorize === undefined
          ? { authorize: (docId: string) => createdIds.has(docId) }
          : {};
      const tool = createDocScriptTool({
        httpOrigin: server.url,
        authToken: hostToken,
        userId: "user-1",
        requestTimeoutMs: requestTimeoutMs(),
        ...access,
        ...options,
        // Preparing a run (the document into the worker) is not what a test here times, unless it says so.
        sandbox: { prepareTimeoutMs: underLoadMs(30_000), ...options.sandbox },
      } as DocScriptToolOptions);
      tools.push(tool);
      return tool;
    },
    async close() {
      await Promise.all(tools.map((tool) => tool.close()));
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** The reference example script, as written. */
export const turnMusicDown = `// Turn the background music down.
const bgm = entities.list().find((e) => e.entityKind === 'track' && e.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
entities.update(held.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: -6 }]);`;

/** The volume of the clip on the bgm track, as a document reads. */
export function musicVolume(document: InterpretedDocument): unknown {
  const bgm = document.entities.find(
    (entity) => entity.entityKind === "track" && entity.payload.role === "bgm",
  );
  const held = document.relations.find(
    (relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === bgm?.entityId,
  );
  return document.entities.find((entity) => entity.entityId === held?.endpoint1EntityId)?.payload.volume;
}
