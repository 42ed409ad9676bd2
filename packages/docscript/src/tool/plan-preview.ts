/** What a plan changes, as the model reads it back from `run-edit-script`. */
import type { Entity, Relation } from "./script-api.ts";

/** At most this many items per list; the counts are always whole. */
export const previewLimit = 50;

export interface PlanPreview {
  /** Writes the script made, refused ones excluded. */
  readonly writes: number;
  readonly counts: {
    readonly created: number;
    readonly updated: number;
    readonly deleted: number;
    readonly linked: number;
    readonly moved: number;
    readonly unlinked: number;
  };
  /** Entities as they read once the plan applies. */
  readonly created: readonly Entity[];
  readonly updated: readonly Entity[];
  readonly deleted: readonly string[];
  readonly linked: readonly Relation[];
  readonly moved: readonly Relation[];
  readonly unlinked: readonly string[];
}
