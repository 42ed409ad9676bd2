/** The script's bulk writes: `entities.updateMany`, checked at the boundary, landing as one write. */
import type { DocumentSession } from "../document/document-session.ts";
import type { UpdateOp } from "../document/update-op.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { isPlainRecord } from "../schema/own-keys.ts";

/**
 * Lands `updates` as one write and answers how many entities it updated. At most `atMost` updates; a
 * field the host stores as a file (`uploaded`) is written by `entities.update` only, one at a time.
 */
export function updateMany(
  session: DocumentSession,
  updates: readonly { entityId: string; ops: readonly UpdateOp[] }[],
  uploaded: Readonly<Record<string, string>>,
  atMost: number,
): number {
  if (!Array.isArray(updates))
    throw new DocScriptError("invalid_operation", "updateMany takes a list of { entityId, ops }");
  if (updates.length > atMost)
    throw new DocScriptError(
      "invalid_operation",
      `updateMany takes at most ${atMost} updates per call, not ${updates.length}: split them into calls`,
    );
  for (const update of updates) {
    if (!isPlainRecord(update) || typeof update.entityId !== "string" || !Array.isArray(update.ops))
      throw new DocScriptError("invalid_operation", "updateMany takes a list of { entityId, ops }");
    const kind = session.entities.get(update.entityId)?.entityKind;
    const field = kind === undefined ? undefined : uploaded[kind];
    if (
      field !== undefined &&
      update.ops.some((op) => isPlainRecord(op) && Array.isArray(op.path) && op.path[0] === field)
    )
      throw new DocScriptError(
        "invalid_operation",
        `updateMany: ${kind}.${field} is stored as a file by the host: write it with entities.update`,
      );
  }
  return session.entities.updateMany(updates);
}
