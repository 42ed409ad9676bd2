/**
 * Which row each Loro container belongs to, so a change's ops name their rows without asking Loro for
 * paths (slow on a fresh fork). A container never moves, so the index only grows; an entry whose row
 * was deleted still names the right row.
 */
export type ContainerIndex = Map<string, { readonly root: string; readonly rowId: string }>;

interface ValueWithId {
  readonly cid: string;
  readonly value: unknown;
}

function isValueWithId(value: unknown): value is ValueWithId {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return (
    keys.length === 2 &&
    typeof (value as { cid?: unknown }).cid === "string" &&
    (value as { cid: string }).cid.startsWith("cid:") &&
    "value" in value
  );
}

/** Plain JSON from `getDeepValueWithID()` output, recording every container it passes under `row`. */
export function stripIds(
  value: unknown,
  index: ContainerIndex,
  row: { root: string; rowId: string },
): unknown {
  if (isValueWithId(value)) {
    index.set(value.cid, row);
    return stripIds(value.value, index, row);
  }
  if (Array.isArray(value)) return value.map((item) => stripIds(item, index, row));
  if (typeof value === "object" && value !== null) {
    const result: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) result[key] = stripIds(item, index, row);
    return result;
  }
  return value;
}
