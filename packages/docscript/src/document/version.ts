/** A document version on the wire: the base64url of a Loro version vector. */
import { createHash } from "node:crypto";
import { VersionVector } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";

export function encodeVersion(version: VersionVector): string {
  return Buffer.from(version.encode()).toString("base64url");
}

/** Throws `invalid_version` for text that is not an encoded version vector. */
export function decodeVersion(text: string): VersionVector {
  try {
    if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new Error("not base64url");
    return VersionVector.decode(new Uint8Array(Buffer.from(text, "base64url")));
  } catch (error) {
    throw new DocScriptError(
      "invalid_version",
      `"${text.slice(0, 40)}" is not a document version`,
      [],
      error,
    );
  }
}

/**
 * Whether two encoded versions name the same version. Loro's encoding is not canonical (the same
 * peers may be written in another order), so equal versions can differ as text: compare the vectors.
 */
export function sameVersion(left: string, right: string): boolean {
  if (left === right) return true;
  try {
    return decodeVersion(left).compare(decodeVersion(right)) === 0;
  } catch {
    return false;
  }
}

/** The longest encoded version an answer carries as it is (one or two writers' entries). */
const plainVersionChars = 32;

/**
 * The version as an answer a model reads names it: the encoded vector while it is short, else a
 * fingerprint of it (`v~` and 22 characters of a SHA-256 over its entries in peer order, so equal
 * versions get equal names whatever order Loro wrote them in). The vector grows an entry for every
 * peer that wrote, and every committed plan writes as a peer of its own: after 200 plans it was 2,796
 * characters, 1,842 tokens, in every answer, past the answer's budget. The full version stays what
 * `getModelContext()` and the document server answer (ADR 0494).
 */
export function versionLabel(text: string): string {
  if (text.length <= plainVersionChars) return text;
  let entries: string;
  try {
    entries = [...decodeVersion(text).toJSON()]
      .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0))
      .map(([peer, counter]) => `${peer}:${counter}`)
      .join(",");
  } catch {
    entries = text;
  }
  return `v~${createHash("sha256").update(entries).digest("base64url").slice(0, 22)}`;
}
