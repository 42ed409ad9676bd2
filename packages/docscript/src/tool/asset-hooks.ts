/**
 * The host's side of the file hooks, between a run and the host's `loadEntityAsset` / `uploadText`.
 * `loadEntityAsset` is asked only about an entity of the run's own document of a stored-file kind: an
 * entity the document already holds is read from the document itself (its file key is the document's,
 * whatever the run sent), and a key a run introduces must pass an allow-list grammar of plain relative
 * file names (`fileKeyProblem`: normalised, bounded segments, no dot segments). `uploadText` takes at
 * most `maxUploadTextChars`; what it stored is staged with the plan and handed to `discardUpload` if
 * the plan is never committed.
 */
import type { LoroDoc } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { Entity } from "../schema/types.ts";
import { fileOf, storedFileKinds } from "./stored-files.ts";

/** The longest file key a document may name. */
export const maxFileKeyLength = 512;
/** The longest text `uploadText` stores for one field (characters). */
export const maxUploadTextChars = 256 * 1024;

/** The most segments a file key has (`takes/2024/take-2.wav` has three). */
export const maxFileKeySegments = 16;
/** The longest segment of a file key (characters). */
export const maxFileKeySegmentLength = 128;

/**
 * One segment of a file key: letters, digits, `_`, `-`, `.` and inner spaces, starting with a letter, a
 * digit or `_` (so never `.`, `..` or a hidden name) and not ending in a dot or a space. An allow-list: what
 * it does not name (a scheme's colon, `%`, `\`, `~`, a control character, a bidi override) never passes.
 */
const segmentPattern = /^[\p{L}\p{N}_](?:[\p{L}\p{N}\p{M}_. -]*[\p{L}\p{N}\p{M}_-])?$/u;

/** Why a file key may not reach the host's store, or undefined when it may (the grammar above). */
export function fileKeyProblem(key: string): string | undefined {
  if (typeof key !== "string" || key.length === 0) return "the file key is empty";
  if (key.length > maxFileKeyLength) return `the file key is longer than ${maxFileKeyLength} characters`;
  if (!key.isWellFormed() || key.normalize("NFC") !== key)
    return "the file key is not normalised (NFC) Unicode text";
  const segments = key.split("/");
  if (segments.length > maxFileKeySegments)
    return `the file key has more than ${maxFileKeySegments} segments`;
  for (const segment of segments) {
    if (segment.length > maxFileKeySegmentLength)
      return `a segment of the file key is longer than ${maxFileKeySegmentLength} characters`;
    if (!segmentPattern.test(segment))
      return "each segment of the file key is letters, digits, `_`, `-`, `.` and inner spaces, starting with a letter, digit or `_` (no empty, `.` or `..` segment, no scheme, no absolute path)";
  }
  return undefined;
}

function refused(message: string): DocScriptError {
  return new DocScriptError("asset_refused", message);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The entity the host's `loadEntityAsset` is asked about, from what a run sent: the document's own row
 * when the document holds the id, else the run's new entity, copied as data; refused unless it is of a
 * stored-file kind and names a file whose key passes `fileKeyProblem`.
 */
export function assetEntity(replica: LoroDoc, sent: unknown): Entity {
  if (!isRecord(sent) || typeof sent.entityId !== "string")
    throw refused("loadEntityAsset takes an entity of the run's document");
  const row = replica.getMap("entities").get(sent.entityId) as { toJSON(): unknown } | undefined;
  let entity: Entity;
  if (row !== undefined && typeof row === "object" && typeof row.toJSON === "function") {
    const json = row.toJSON();
    const fields = isRecord(json) && isRecord(json.fields) ? json.fields : {};
    entity = {
      entityId: sent.entityId,
      entityKind: isRecord(json) && typeof json.kind === "string" ? json.kind : "",
      payload: fields,
    };
  } else {
    const copied = JSON.parse(JSON.stringify(sent)) as Record<string, unknown>;
    entity = {
      entityId: sent.entityId,
      entityKind: typeof copied.entityKind === "string" ? copied.entityKind : "",
      payload: isRecord(copied.payload) ? copied.payload : {},
    };
  }
  if (!storedFileKinds.has(entity.entityKind))
    throw refused(
      `${entity.entityId} is a ${entity.entityKind || "row of no kind"} and names no stored file`,
    );
  const file = fileOf(entity);
  if (file === undefined) throw refused(`${entity.entityId} names no stored file`);
  const problem = fileKeyProblem(file.key);
  if (problem !== undefined) throw refused(`${entity.entityId}: ${problem}`);
  return entity;
}

/** The text a run asks `uploadText` to store, refused past the bound. */
export function uploadTextOf(sent: unknown): string {
  const text = isRecord(sent) ? sent.text : undefined;
  if (typeof text !== "string") throw new DocScriptError("upload_refused", "uploadText takes text");
  if (text.length > maxUploadTextChars)
    throw new DocScriptError(
      "upload_too_large",
      `the text is ${text.length} characters; uploadText stores at most ${maxUploadTextChars}`,
    );
  return text;
}
