/** Test helpers: a client-side editor that pulls, edits through a document session and pushes one update. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc } from "loro-crdt";
import {
  createDocumentClient,
  type DocumentClient,
  type DocumentSession,
  openDocument,
  type PushResult,
  timelineSchema,
} from "../src/index.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";

export interface Editor {
  readonly doc: LoroDoc;
  readonly client: DocumentClient;
  pull(): Promise<void>;
  /** Runs `edit` in a session over a fork of what was pulled and pushes the result as one update. */
  edit(edit: (session: DocumentSession) => void): Promise<PushResult>;
  session(): DocumentSession;
}

export function createEditor(origin: string, documentId: string, token: string, peer: number): Editor {
  const client = createDocumentClient({ origin, token, userId: `user-${peer}` });
  const doc = new LoroDoc();
  doc.setPeerId(peer);
  return {
    doc,
    client,
    async pull() {
      await client.pullInto(documentId, doc);
    },
    async edit(edit) {
      const before = doc.oplogVersion();
      const session = openDocument(doc, timelineSchema);
      edit(session);
      doc.commit();
      return client.push(documentId, doc.export({ mode: "update", from: before }));
    },
    session: () => openDocument(doc, timelineSchema),
  };
}

/** Writes a bgm track with one clip (marker + audio) and returns their ids. */
export function seedTrack(
  session: DocumentSession,
  key = "file-1",
): { trackId: string; clipId: string; markerId: string; audioId: string } {
  const track = session.entities.create({ entityKind: "track", payload: { role: "bgm", name: "music" } });
  const audio = session.entities.create({
    entityKind: "audio",
    payload: { system: "files", key, durationMs: 30_000 },
  });
  const clip = session.entities.create({ entityKind: "clip", payload: { volume: -3 } });
  const marker = session.entities.create({
    entityKind: "sequence-marker",
    payload: { startMs: 0, durationMs: 10_000 },
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: track.entityId,
    endpoint1EntityId: clip.entityId,
  });
  session.relations.link({
    relationKind: "marker",
    endpoint0EntityId: clip.entityId,
    endpoint1EntityId: marker.entityId,
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: clip.entityId,
    endpoint1EntityId: audio.entityId,
  });
  return {
    trackId: track.entityId,
    clipId: clip.entityId,
    markerId: marker.entityId,
    audioId: audio.entityId,
  };
}

/** A document server on a fresh SQLite file holding "doc", created from the sample timeline. */
export interface SampleServer {
  readonly client: DocumentClient;
  readonly adminToken: string;
  readonly token: string;
  /** Pulls "doc" into a fresh Loro document. */
  read(): Promise<LoroDoc>;
}

/** Runs `body` against a sample server, then closes it and deletes its file. */
export async function withSampleServer(body: (server: SampleServer) => Promise<void>): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), "docscript-sample-server-"));
  const adminToken = "admin-token-for-tests-0123456789";
  const token = "document-token-for-tests-0123456789";
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: join(directory, "documents.sqlite") }),
    schema: timelineSchema,
    adminToken,
  });
  try {
    const client = createDocumentClient({ origin: server.url, token });
    await client.createDocument("doc", { adminToken, token, snapshot: sampleTimelineSnapshot() });
    const read = async () => {
      const doc = new LoroDoc();
      await client.pullInto("doc", doc);
      return doc;
    };
    await body({ client, adminToken, token, read });
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
}
