/**
 * The host's side of the file hooks, between a run and the host's `loadEntityAsset` / `uploadText`.
 * `loadEntityAsset` is asked only about an entity of the run's own document of a stored-file kind: an
 * entity the document already holds is read from the document itself (its file key is the document's,
 * whatever the run sent), and a key a run introduces must be a plain relative file name — no `..`
 * segment, no absolute path, no URL scheme, no backslash, no control character. `uploadText` takes at
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

/** Why a file key may not reach the host's store, or undefined when it may. */
export function fileKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "the file key is empty";
  if (key.length > maxFileKeyLength) return `the file key is longer than ${maxFileKeyLength} characters`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses.
  if (/[\u0000-\u001f\u007f]/.test(key)) return "the file key holds a control character";
  if (key.includes("\\")) return "the file key holds a backslash";
  if (key.startsWith("/") || key.startsWith("~")) return "the file key is an absolute path";
  if (/^[a-z][a-z0-9+.-]*:/i.test(key)) return "the file key names a URL scheme or a drive";
  if (key.split("/").some((segment) => segment === ".." || segment === "." || segment === ""))
    return "the file key has an empty, `.` or `..` segment";
  if (/%2e|%2f|%5c/i.test(key)) return "the file key holds an encoded dot or slash";
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
