/** Test helpers: a client-side editor that pulls, edits through a document session and pushes one update. */
import { LoroDoc } from "loro-crdt";
import {
  createDocumentClient,
  type DocumentClient,
  type DocumentSession,
  openDocument,
  type PushResult,
  timelineSchema,
} from "../src/index.ts";

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
