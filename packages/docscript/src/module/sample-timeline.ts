/** A small timeline document to try the tool on: a video track, background music and a caption. */
import { LoroDoc } from "loro-crdt";
import { type DocumentSession, openDocument } from "../document/document-session.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";

export interface SampleTimelineOptions {
  /** Extra clips on the video track, to make documents of a given size (each clip is three entities). */
  readonly extraClips?: number;
}

/** Builds the sample as Loro snapshot bytes, authored by the host (so media carry their storage facts). */
export function sampleTimelineSnapshot(options: SampleTimelineOptions = {}): Uint8Array {
  const doc = new LoroDoc();
  doc.setPeerId(1);
  const session = openDocument(doc, timelineSchema, { role: "host", createId: sequentialIds() });
  const video = track(session, "video", "Main");
  const bgm = track(session, "bgm", "Music");
  const captions = track(session, "caption", "Captions");
  const intro = session.entities.create({
    entityKind: "video",
    payload: {
      system: "files",
      key: "intro.mp4",
      name: "Intro",
      durationMs: 8000,
      storageKey: "store/intro.mp4",
      digest: "sha256:intro",
    },
  });
  clip(session, video, intro.entityId, 0, 8000);
  const music = session.entities.create({
    entityKind: "audio",
    payload: {
      system: "files",
      key: "music.mp3",
      name: "Theme",
      durationMs: 60000,
      storageKey: "store/music.mp3",
      digest: "sha256:music",
    },
  });
  clip(session, bgm, music.entityId, 0, null);
  const hello = session.entities.create({ entityKind: "caption", payload: { text: "Hello" } });
  clip(session, captions, hello.entityId, 500, 2000);
  for (let index = 0; index < (options.extraClips ?? 0); index++) {
    const shot = session.entities.create({
      entityKind: "image",
      payload: {
        system: "files",
        key: `shot-${index}.png`,
        name: `Shot ${index}`,
        storageKey: `store/shot-${index}.png`,
        digest: `sha256:${index}`,
      },
    });
    clip(session, video, shot.entityId, 8000 + index * 1000, 1000);
  }
  session.assertValid();
  doc.commit({ message: "sample timeline" });
  return doc.export({ mode: "snapshot" });
}

function sequentialIds(): (kind: string) => string {
  const counts = new Map<string, number>();
  return (kind) => {
    const next = (counts.get(kind) ?? 0) + 1;
    counts.set(kind, next);
    return `${kind}-${next}`;
  };
}

function track(session: DocumentSession, role: string, name: string): string {
  return session.entities.create({ entityKind: "track", payload: { role, name } }).entityId;
}

function clip(
  session: DocumentSession,
  trackId: string,
  contentId: string,
  startMs: number,
  durationMs: number | null,
): string {
  const clipEntity = session.entities.create({ entityKind: "clip", payload: {} });
  const marker = session.entities.create({ entityKind: "sequence-marker", payload: { startMs, durationMs } });
  session.relations.link({
    relationKind: "marker",
    endpoint0EntityId: clipEntity.entityId,
    endpoint1EntityId: marker.entityId,
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: clipEntity.entityId,
    endpoint1EntityId: contentId,
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: trackId,
    endpoint1EntityId: clipEntity.entityId,
  });
  return clipEntity.entityId;
}
