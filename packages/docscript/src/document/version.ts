/** A document version on the wire: the base64url of a Loro version vector. */
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
