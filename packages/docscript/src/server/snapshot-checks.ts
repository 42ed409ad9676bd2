/**
 * What `POST /documents` checks of the snapshot a document is created from (ADR 0553): the rules a
 * push's changes pass, over every change the snapshot's history holds, so that no content a push would
 * be refused for enters the server by creation instead. Refused with `invalid_snapshot` (naming what is
 * wrong, in the push check's words) or `document_invalid` (its issues); nothing stored. The history is
 * read without exporting it as JSON, in slices between which the event loop runs (ADR 0554:
 * `snapshot-history.ts`).
 */
import { isContainer, LoroDoc, LoroMap } from "loro-crdt";
import { checkDocument, checkSteps, compareIssues } from "../document/check-document.ts";
import { projectDocument, versionKey } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { Projection } from "../document/projection.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import type { ContainerEntry, RowChange, RowRoot } from "./document-store.ts";
import { describeError } from "./open-document.ts";
import { mapsOfRowByJson } from "./row-containers.ts";
import { rowChanges } from "./row-members.ts";
import { historyReasons, slicer, yieldToEventLoop } from "./snapshot-history.ts";

/** The document a create starts from (empty without a snapshot) and its projection, checked. */
export async function checkedSnapshot(
  schema: Schema,
  snapshot: Uint8Array | undefined,
): Promise<ProjectedSnapshot & { doc: LoroDoc }> {
  const doc = new LoroDoc();
  if (snapshot !== undefined) {
    try {
      doc.import(snapshot);
    } catch (error) {
      throw new DocScriptError(
        "invalid_snapshot",
        `the snapshot does not import: ${describeError(error)}`,
        [],
        error,
      );
    }
    // A shallow snapshot holds state whose ops it lacks: the checks below read ops, so it would pass
    // them unread. Refused (the server stores whole histories; its plan index reads them).
    if (doc.isShallow()) {
      throw new DocScriptError(
        "invalid_snapshot",
        "the snapshot cannot be stored: it is a shallow snapshot; send a whole one (mode: snapshot)",
      );
    }
    // Checked from its history before any row is read (a too-deep value breaks Loro's reader).
    const reasons = await historyReasons(doc);
    if (reasons.length > 0)
      throw new DocScriptError("invalid_snapshot", `the snapshot cannot be stored: ${reasons.join("; ")}`);
    await yieldToEventLoop();
  }
  const { projection, maps } =
    snapshot === undefined
      ? { projection: projectDocument(doc, schema) }
      : await projectInSlices(doc, schema);
  if (snapshot !== undefined) await yieldToEventLoop();
  const issues = snapshot === undefined ? checkDocument(projection) : await checkInSlices(projection);
  if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
  return { doc, projection, maps };
}

/**
 * The projection `projectDocument(doc, schema)` reads, row by row in slices with the event loop let run
 * between them (ADR 0560: the roots' `toJSON` at once held it ~1–1.5 s at 5 MB). Rows are read in the
 * order `toJSON`'s objects list their keys (integer-like ids first), as `projectDocument` reads them.
 */
export async function projectInSlices(doc: LoroDoc, schema: Schema): Promise<ProjectedSnapshot> {
  const pause = slicer();
  const projection = new Projection(schema);
  const maps: RowMaps = { [ENTITIES]: new Map(), [RELATIONS]: new Map() };
  for (const root of [ENTITIES, RELATIONS] as const) {
    const map = doc.getMap(root);
    const ids = Object.keys(Object.fromEntries(map.keys().map((rowId) => [rowId, 0])));
    for (const rowId of ids) {
      const value = map.get(rowId) as unknown;
      const json = isContainer(value) ? value.toJSON() : value;
      // Its maps while the row is at hand (`createdRows` would ask Loro for the row again).
      if (value instanceof LoroMap) maps[root].set(rowId, mapsOfRowByJson(value, json));
      if (isContainer(value)) value.free();
      if (root === ENTITIES) projection.setRow(rowId, json);
      else projection.setRelationRow(rowId, json);
      await pause();
    }
  }
  projection.readAt = versionKey(doc);
  return { projection, maps };
}

/** Each row's maps for the container index, by root and row id (a row that is no map has none). */
export type RowMaps = Record<RowRoot, Map<string, ContainerEntry[]>>;

/** A created document's projection, with its rows' maps when they were read beside it. */
export interface ProjectedSnapshot {
  readonly projection: Projection;
  readonly maps?: RowMaps | undefined;
}

/** `checkDocument(projection)`, a step at a time in slices with the event loop let run between them. */
async function checkInSlices(projection: Projection): Promise<DocumentIssue[]> {
  const pause = slicer();
  const issues: DocumentIssue[] = [];
  for (const _step of checkSteps(projection, issues)) await pause();
  return issues.sort(compareIssues);
}

/** Rows written out per slice of `createdRows`. */
const rowsPerSlice = 500;

/**
 * Every row of a created document with its maps for the container index (ADR 0514), as
 * `allRowChanges(projection, mapsOfRows(doc))` makes them (`read`: the maps `projectInSlices` found
 * beside the projection), a few hundred rows at a time with the event loop let run between (ADR 0554:
 * the 30,000 rows of a 5 MB snapshot took 2.5–7 s at once).
 */
export async function createdRows(
  doc: LoroDoc,
  projection: Projection,
  read?: RowMaps,
): Promise<RowChange[]> {
  const pause = slicer();
  const roots = { [ENTITIES]: doc.getMap(ENTITIES), [RELATIONS]: doc.getMap(RELATIONS) };
  const mapsOf = (root: RowRoot, rowId: string) => {
    if (read !== undefined) return read[root].get(rowId);
    const value = roots[root].get(rowId) as unknown;
    const json = root === ENTITIES ? projection.rowJson(rowId) : projection.relationJson(rowId);
    const maps = value instanceof LoroMap ? mapsOfRowByJson(value, json) : undefined;
    if (isContainer(value)) value.free();
    return maps;
  };
  const rows: RowChange[] = [];
  for (const [root, ids] of [
    [ENTITIES, [...projection.rowIds()]],
    [RELATIONS, [...projection.relationRowIds()]],
  ] as const) {
    for (let start = 0; start < ids.length; start += rowsPerSlice) {
      const slice = ids.slice(start, start + rowsPerSlice);
      const chosen =
        root === ENTITIES ? { entities: slice, relations: [] } : { entities: [], relations: slice };
      rows.push(...rowChanges(projection, chosen, undefined, undefined, mapsOf));
      await pause();
    }
  }
  return rows;
}
