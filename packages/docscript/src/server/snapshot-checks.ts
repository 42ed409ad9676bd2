/**
 * What `POST /documents` checks of the snapshot a document is created from (ADR 0553): the very
 * checks a push's changes pass, over every change the snapshot's history holds, so that no content a
 * push would be refused for enters the server by creation instead. Refused with `invalid_snapshot`
 * (naming what is wrong, in the push check's words) or `document_invalid` (its issues); nothing stored.
 */
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../document/check-document.ts";
import { projectDocument } from "../document/interpret.ts";
import type { Projection } from "../document/projection.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { rowsOfSpans } from "./changed-rows.ts";
import { describeError } from "./open-document.ts";
import { changesIn, unreadableKeys } from "./push-checks.ts";
import { foreignRootReasons } from "./push-staging.ts";

/** The document a create starts from (empty without a snapshot) and its projection, checked. */
export function checkedSnapshot(
  schema: Schema,
  snapshot: Uint8Array | undefined,
): { doc: LoroDoc; projection: Projection } {
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
    const spans = doc.findIdSpansBetween([], doc.frontiers()).forward;
    const changes = changesIn(doc, spans);
    // Checked from its ops before any row is read (a too-deep value breaks Loro's reader).
    const unreadable = unreadableKeys(doc, spans, changes);
    // A push writing a root container outside the mapping is rejected; so is a snapshot holding one.
    const foreign = foreignRootReasons(rowsOfSpans(doc, spans, new Map(), changes).foreignRoots);
    const reasons = [...unreadable, ...foreign];
    if (reasons.length > 0)
      throw new DocScriptError("invalid_snapshot", `the snapshot cannot be stored: ${reasons.join("; ")}`);
  }
  const projection = projectDocument(doc, schema);
  const issues = checkDocument(projection);
  if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
  return { doc, projection };
}
