/**
 * What `POST /documents` checks of the snapshot a document is created from (ADR 0553): the rules a
 * push's changes pass, over every change the snapshot's history holds, so that no content a push would
 * be refused for enters the server by creation instead. Refused with `invalid_snapshot` (naming what is
 * wrong, in the push check's words) or `document_invalid` (its issues); nothing stored. The history is
 * read without exporting it as JSON, in slices between which the event loop runs (ADR 0554:
 * `snapshot-history.ts`).
 */
import { isContainer, LoroDoc, LoroMap } from "loro-crdt";
import { checkDocument } from "../document/check-document.ts";
import { projectDocument } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { RowChange, RowRoot } from "./document-store.ts";
import { describeError } from "./open-document.ts";
import { mapsOfRowByJson } from "./row-containers.ts";
import { rowChanges } from "./row-members.ts";
import { historyReasons, slicer, yieldToEventLoop } from "./snapshot-history.ts";

/** The document a create starts from (empty without a snapshot) and its projection, checked. */
export async function checkedSnapshot(
  schema: Schema,
  snapshot: Uint8Array | undefined,
): Promise<{ doc: LoroDoc; projection: Projection }> {
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
  const projection = projectDocument(doc, schema);
  if (snapshot !== undefined) await yieldToEventLoop();
  const issues = checkDocument(projection);
  if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
  return { doc, projection };
}

/** Rows written out per slice of `createdRows`. */
const rowsPerSlice = 500;

/**
 * Every row of a created document with its maps for the container index (ADR 0514), as
 * `allRowChanges(projection, mapsOfRows(doc))` makes them, a few hundred rows at a time with the event
 * loop let run between (ADR 0554: the 30,000 rows of a 5 MB snapshot took 2.5–7 s at once).
 */
export async function createdRows(doc: LoroDoc, projection: Projection): Promise<RowChange[]> {
  const pause = slicer();
  const roots = { [ENTITIES]: doc.getMap(ENTITIES), [RELATIONS]: doc.getMap(RELATIONS) };
  const mapsOf = (root: RowRoot, rowId: string) => {
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
