/**
 * Reading a staged run's rows (ADR 0508, 0514): a slice at a time, each row patched from its stored
 * JSON by the parts' field sets or read out of the shadow, and what the push's check will look up for
 * them read into the projection meanwhile (`warmStaged`).
 */
import type { LoroDoc } from "loro-crdt";
import { checkPayloadsAhead } from "../document/check-document.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import type { StoredEntity } from "../document/row-shape.ts";
import type { RowRoot } from "./document-store.ts";
import type { OpenDocument } from "./open-document.ts";
import { type StagedParts, stagedOf } from "./push-stage.ts";
import { RowReads, rowShapeOf, scopeLacking } from "./push-staging.ts";
import { type FieldSet, patchedRow, rowValueOf } from "./row-containers.ts";

/**
 * Rows read out of Loro per queued slice (~70 µs a row at 100k entities, and the warming of their
 * lookups: a slice takes ~25 ms, which a run's lookup waits at most).
 */
export const rowsPerSlice = 200;

/** A row as stored (undefined: not held, or no such row). */
export type StoredRow = (root: RowRoot, rowId: string) => unknown;

/**
 * The rows the next slice of `readStaged` patches from their stored JSON (ADR 0514): the caller has
 * the projection hold them first.
 */
export function patchesAhead(
  shadow: LoroDoc,
  most = rowsPerSlice,
): { readonly entities: string[]; readonly relations: string[] } {
  const ahead = { entities: [] as string[], relations: [] as string[] };
  const parts = stagedOf(shadow);
  if (parts === undefined) return ahead;
  let read = 0;
  for (const [unread, sets, into] of [
    [parts.unreadEntities, parts.sets.entities, ahead.entities],
    [parts.unreadRelations, parts.sets.relations, ahead.relations],
  ] as const) {
    for (const rowId of unread) {
      if (read++ >= most) return ahead;
      if (Array.isArray(sets.get(rowId))) into.push(rowId);
    }
  }
  return ahead;
}

/**
 * Reads up to `most` staged rows not read yet out of `shadow`: whether some are left. A row whose
 * parts only set plain values into its indexed maps is its stored JSON (`stored`) with those values
 * set (ADR 0514); any other is read out of Loro, or, when the shadow is detached (ADR 0517), left
 * unread with `"attach"`: the caller moves the parts to an attached replica (`attachedShadow`) first.
 */
export function readStaged(shadow: LoroDoc, most = rowsPerSlice, stored?: StoredRow): boolean | "attach" {
  const parts = stagedOf(shadow);
  if (parts === undefined) return false;
  let read = 0;
  for (const [root, unread, into, unwarmed, sets, kept] of [
    [
      ENTITIES,
      parts.unreadEntities,
      parts.entities,
      parts.unwarmed.entities,
      parts.sets.entities,
      parts.kept.entities,
    ],
    [
      RELATIONS,
      parts.unreadRelations,
      parts.relations,
      parts.unwarmed.relations,
      parts.sets.relations,
      parts.kept.relations,
    ],
  ] as const) {
    const map = shadow.getMap(root);
    for (const rowId of unread) {
      if (read >= most) return true;
      unread.delete(rowId);
      const rowSets = sets.get(rowId);
      const json = stored === undefined || !Array.isArray(rowSets) ? undefined : stored(root, rowId);
      const patched = json === undefined ? undefined : patchedRow(json, rowSets as FieldSet[]);
      if (patched !== undefined) {
        into.set(rowId, patched);
        kept.add(rowId);
      } else if (shadow.isDetached()) {
        // A detached shadow's state is the live document's (ADR 0517): the row is read once attached.
        unread.add(rowId);
        return "attach";
      } else {
        kept.delete(rowId);
        into.set(rowId, rowValueOf(map, rowId));
      }
      unwarmed.add(rowId);
      read++;
    }
  }
  return false;
}

/** Fills made at most to warm one slice's rows. */
const warmFills = 4;

/**
 * Reads into `open.projection` what the push's check will look up for the rows read since the last
 * warming (the rows as they were, the check's reach: `scopeLacking`), by `fill`: the push then finds
 * them held. A cache of the live document's stored rows only: nothing is judged or staged in it.
 */
export async function warmStaged(
  open: OpenDocument,
  shadow: LoroDoc,
  fill: () => Promise<void>,
): Promise<void> {
  const parts = stagedOf(shadow);
  if (parts === undefined) return;
  const rows = {
    entities: new Set(parts.unwarmed.entities),
    relations: new Set(parts.unwarmed.relations),
    foreignRoots: new Set<string>(),
  };
  parts.unwarmed.entities.clear();
  parts.unwarmed.relations.clear();
  if (rows.entities.size + rows.relations.size === 0) return;
  const reads = new RowReads(shadow, {
    entities: parts.entities,
    relations: parts.relations,
    verdicts: parts.verdicts,
  });
  const schema = open.projection.schema;
  for (const rowId of rows.entities) {
    const json = parts.entities.get(rowId);
    if (json !== undefined) parts.shapes.set(rowId, rowShapeOf(schema, rowId, json));
  }
  for (let fills = 0; fills < warmFills && scopeLacking(open.projection, rows, reads); fills++) await fill();
  if (!open.projection.lacking) checkStagedAhead(open.projection, parts, rows.entities);
}

/**
 * The payloads the push's check reads, checked ahead (`checkPayloadsAhead`) for `rowIds`, as they
 * were (held now) and as the parts left them: of a row whose fields alone the parts wrote, the
 * entities written (the check reaches only them); of any other, every entity of the row.
 */
function checkStagedAhead(projection: Projection, parts: StagedParts, rowIds: Iterable<string>): void {
  for (const rowId of rowIds) {
    const shape = parts.shapes.get(rowId);
    const verdict = parts.verdicts.get(rowId);
    const written = verdict !== undefined && verdict.after === shape?.json ? verdict.written : undefined;
    const read = (entities: readonly StoredEntity[] | undefined) =>
      written === undefined
        ? (entities ?? [])
        : (entities ?? []).filter((entity) => written.includes(entity.entityId));
    checkPayloadsAhead(projection.schema, read(shape?.read.entities));
    checkPayloadsAhead(projection.schema, read(projection.row(rowId)?.entities));
  }
}
