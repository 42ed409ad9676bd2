/**
 * What a session's reads and writes share: the document, its projection (kept in step with each
 * write), its rows (`session-rows.ts`), the one way a write lands (`session-land.ts`: staged, checked
 * within its reach, then applied to Loro) and its order keys (`session-order.ts`).
 */

import { randomBytes } from "node:crypto";
import type { LoroDoc } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { projectDocument, versionKey } from "./interpret.ts";
import type { Projection } from "./projection.ts";
import type { StoredEntity } from "./row-shape.ts";
import { type ChangedScope, sessionLand } from "./session-land.ts";
import { sessionOrder } from "./session-order.ts";
import {
  checkHostOnly,
  embeddedJson,
  sessionRowReads,
  sessionRowWrites,
  topLevelJson,
} from "./session-rows.ts";
import type { DocumentSessionOptions } from "./session-types.ts";

export type { RowChanges } from "./session-land.ts";

/** A read refused for answering more than `atMost` items (a filter's `atMost`). */
export function readLimit(
  what: string,
  atMost: number,
  instead = "filter by kind, or read by id (entities.get) or by entity (relations.of)",
): DocScriptError {
  return new DocScriptError(
    "read_limit",
    `${what} matches more than ${atMost}; one read answers at most ${atMost}: ${instead}`,
  );
}

export type SessionContext = ReturnType<typeof createSessionContext>;

/** The projection a session starts from: the given one's overlay when it was read at this version. */
function startingProjection(doc: LoroDoc, schema: Schema, options: DocumentSessionOptions): Projection {
  const given = options.projection;
  return given !== undefined &&
    given.schema === schema &&
    given.readAt !== undefined &&
    given.readAt === versionKey(doc) &&
    doc.getPendingTxnLength() === 0
    ? given.overlay()
    : projectDocument(doc, schema);
}

export function createSessionContext(doc: LoroDoc, schema: Schema, options: DocumentSessionOptions) {
  const projection = startingProjection(doc, schema, options);
  /** Changed only for the length of one call made through `asHost()`. */
  const state: { role: "script" | "host" } = { role: options.role ?? "script" };
  const createId =
    options.createId ?? ((kind: string) => `${kind}-${randomBytes(9).toString("base64url").slice(0, 12)}`);
  const rows = sessionRowReads(doc, projection);
  const order = sessionOrder(projection);
  const changed: ChangedScope = {
    entityIds: new Set<string>(),
    relationIds: new Set<string>(),
    fieldRows: new Set<string>(),
    invariantEntityIds: new Set<string>(),
  };
  const land = sessionLand({
    doc,
    projection,
    rowJson: rows.rowJson,
    changed,
    relationsWritten: order.forgetLast,
  });
  const hostOnlyCheck = (
    stored: Pick<StoredEntity, "entityKind" | "entityId">,
    fieldNames: Iterable<string>,
  ): void => checkHostOnly(schema, state.role, stored, fieldNames);
  return {
    doc,
    schema,
    projection,
    /** The role writes are checked for; `asHost()` changes it for the length of one call. */
    state,
    createId,
    ...rows,
    ...sessionRowWrites(schema, rows),
    changed,
    land,
    hostOnlyCheck,
    embeddedJson,
    topLevelJson,
    positionAround: order.positionAround,
    lastPosition: order.lastPosition,
    appendedLast: order.appendedLast,
  };
}
