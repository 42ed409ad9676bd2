/** What a plan changes, as the model reads it back from `run-edit-script`: one entry per changed item. */

/** The dispatcher lists at most this many changes; the counts are always whole, and `omitted` says the rest. */
export const previewLimit = 200;

/** A field whose value the plan changes: `path` is dotted (`style.fontSize`), values elided when long. */
export interface FieldChange {
  readonly path: string;
  readonly before: unknown;
  readonly after: unknown;
}

/** One changed entity or relation; `fields` lists an update's changes, `payload` a created entity's values. */
export type PreviewChange =
  | {
      readonly change: "created";
      readonly entityId: string;
      readonly entityKind: string;
      readonly payload: unknown;
    }
  | {
      readonly change: "updated";
      readonly entityId: string;
      readonly entityKind: string;
      readonly fields: readonly FieldChange[];
    }
  | { readonly change: "deleted"; readonly entityId: string; readonly entityKind?: string }
  | {
      readonly change: "linked" | "moved";
      readonly relationId: string;
      readonly relationKind: string;
      readonly endpoint0EntityId: string;
      readonly endpoint1EntityId: string;
    }
  | {
      readonly change: "unlinked";
      readonly relationId: string;
      readonly relationKind?: string;
      /** Set when a delete took the relation with it: its ends, and the entity whose delete did. */
      readonly endpoint0EntityId?: string;
      readonly endpoint1EntityId?: string;
      readonly by?: string;
    };

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
  /** Created, updated, deleted entities, then linked, moved, unlinked relations, each as it reads once the plan applies. */
  readonly changes: readonly PreviewChange[];
  /** Changes not listed (past the list's limit or the answer's token budget). */
  readonly omitted: number;
  /** Entities the plan's deletes leave unreferenced (no relation touches them any more), at most 50. */
  readonly unreferenced?: readonly string[];
  /**
   * The script's writes left the document as it was (each wrote the value already held): the plan
   * holds no change, its counts are zero, and committing it publishes nothing.
   */
  readonly unchanged?: true;
}

/** The preview of a plan that holds no change: its writes are counted, nothing else. */
export function unchangedPreview(writes: number): PlanPreview {
  return {
    writes,
    counts: { created: 0, updated: 0, deleted: 0, linked: 0, moved: 0, unlinked: 0 },
    changes: [],
    omitted: 0,
    unchanged: true,
  };
}

/** A string longer than this reads as its head and a count of what was left out. */
export const elidedStringLength = 80;
/** An array longer than this reads as its first items and a count of the rest. */
export const elidedArrayItems = 3;

/**
 * A value shortened for a preview: long strings keep their first characters and say how many were left
 * out, long arrays keep their first items and say how many followed, deep values are summarised.
 */
export function elide(value: unknown, depth = 0): unknown {
  if (typeof value === "string") {
    const points = [...value];
    if (points.length <= elidedStringLength) return value;
    return `${points.slice(0, elidedStringLength - 20).join("")}… [+${points.length - (elidedStringLength - 20)} chars]`;
  }
  if (Array.isArray(value)) {
    const kept = value.slice(0, elidedArrayItems).map((item) => elide(item, depth + 1));
    return value.length > elidedArrayItems
      ? [...kept, `… [+${value.length - elidedArrayItems} items, ${value.length} in all]`]
      : kept;
  }
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value);
    if (depth >= 3) return `{… ${entries.length} fields}`;
    return Object.fromEntries(entries.map(([key, item]) => [key, elide(item, depth + 1)]));
  }
  return value;
}

/** The fields that differ between two values, dotted paths into records (4 deep); long values elided. */
export function fieldChanges(before: unknown, after: unknown): FieldChange[] {
  const changes: FieldChange[] = [];
  const isRecord = (value: unknown): value is Record<string, unknown> =>
    typeof value === "object" && value !== null && !Array.isArray(value);
  const walk = (path: string[], left: unknown, right: unknown) => {
    if (JSON.stringify(left) === JSON.stringify(right)) return;
    if (isRecord(left) && isRecord(right) && path.length < 4) {
      for (const key of new Set([...Object.keys(left), ...Object.keys(right)]))
        walk([...path, key], left[key], right[key]);
      return;
    }
    changes.push({
      path: path.join("."),
      before: left === undefined ? null : elide(left),
      after: right === undefined ? null : elide(right),
    });
  };
  walk([], before, after);
  return changes;
}
