/** A node's state update as JSON Patch operations (RFC 6902), for frames a UI applies as AG-UI `STATE_DELTA`. */
import { toFrameData } from "./frame-data.ts";

export interface StatePatchOperation {
  readonly op: "add" | "remove";
  readonly path: string;
  readonly value?: unknown;
}

/**
 * The operations that turn `before` into `{ ...before, ...update }`: nodes merge their update at the top
 * level, so each key of the update is one `add` (which replaces a key that exists), or a `remove` when
 * the update sets it to undefined.
 */
export function stateDeltaOf(before: object, update: object | undefined): StatePatchOperation[] {
  const operations: StatePatchOperation[] = [];
  for (const [key, value] of Object.entries(update ?? {})) {
    const path = `/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    if (value === undefined) {
      if (Object.hasOwn(before, key)) operations.push({ op: "remove", path });
    } else
      operations.push({ op: "add", path, value: toFrameData(value, `the state key ${JSON.stringify(key)}`) });
  }
  return operations;
}
