/** Host-only hooks: none of these reach the model. */
import type { Entity } from "../schema/types.ts";

export interface LoadedEntityAsset {
  /** What the store holds; handed to the script by `materialize`, never written on the entity. */
  readonly content: unknown;
  readonly storageKey?: string;
  readonly digest?: string;
}

export interface UploadedText {
  readonly system: string;
  readonly key: string;
  readonly storageKey?: string;
  readonly digest: string;
}

export interface GenerationFact {
  readonly outputAssetId: string;
  readonly inputAssetIds: readonly string[];
}

export interface DocScriptHooks {
  /** Reads a medium's own file, or a transcript's transcription file. */
  readonly loadEntityAsset?: (
    docId: string,
    entity: Entity,
  ) => Promise<LoadedEntityAsset> | LoadedEntityAsset;
  /**
   * Stores raw text as a text file (a phonetic script's phonemeScript) and returns its facts. At most
   * 256 KiB characters a text (`maxUploadTextChars`). What it stores is staged with the plan: durable
   * once the plan commits, handed to `discardUpload` when the plan fails, is dropped unpublished (the
   * tool keeps the last `maxPlans`) or its commit is rejected.
   */
  readonly uploadText?: (docId: string, text: string) => Promise<UploadedText> | UploadedText;
  /** Removes a text `uploadText` stored for a plan that will never be published. */
  readonly discardUpload?: (docId: string, upload: UploadedText) => Promise<void> | void;
  /** After a confirmed commit: what the media the plan created were generated from, by file key. */
  readonly loadGenerationFacts?: (
    docId: string,
    fileKeys: readonly string[],
  ) => Promise<readonly GenerationFact[]> | readonly GenerationFact[];
}
