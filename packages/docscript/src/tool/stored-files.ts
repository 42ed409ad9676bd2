/** Which entities name stored files in the timeline schema, and how to read a file's name off one. */
import { mediaKinds } from "../timeline/timeline-schema.ts";

/** What these helpers read off an entity. */
interface EntityLike {
  readonly entityKind: string;
  readonly payload: Readonly<Record<string, unknown>>;
}

/** Media and transcripts: each names a file the host's store holds. */
export const storedFileKinds: ReadonlySet<string> = new Set([...mediaKinds, "audio-script"]);

/** Sound plays from storage: these fail without a storageKey. */
const storageRequired: ReadonlySet<string> = new Set(["audio", "voiceover-recording"]);

/** Fields whose raw text the host stores through `uploadText`, by entity kind. */
export const uploadedTextFields: Readonly<Record<string, string>> = { "phonetic-script": "phonemeScript" };

export function requiresStorage(entity: EntityLike): boolean {
  return storageRequired.has(entity.entityKind);
}

/** The file an entity names: a medium's own file, or a transcript's transcription file. */
export function fileOf(entity: EntityLike): { system: string; key: string } | undefined {
  const source =
    entity.entityKind === "audio-script"
      ? (entity.payload.transcription as { system?: unknown; key?: unknown } | null | undefined)
      : storedFileKinds.has(entity.entityKind)
        ? (entity.payload as { system?: unknown; key?: unknown })
        : undefined;
  if (source == null || typeof source.key !== "string" || typeof source.system !== "string") return undefined;
  return { system: source.system, key: source.key };
}
