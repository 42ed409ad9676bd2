/**
 * `sha256Hex`: SHA-256 through WebCrypto (`globalThis.crypto.subtle`), so the middlewares run
 * unchanged on edge runtimes and in browsers. Undefined when WebCrypto is missing: callers then
 * bypass the cache instead of falling back to a weaker hash.
 */
const encoder = new TextEncoder();

export async function sha256Hex(text: string): Promise<string | undefined> {
  const subtle = (globalThis as { crypto?: Crypto }).crypto?.subtle;
  if (subtle === undefined) return undefined;
  const digest = new Uint8Array(await subtle.digest("SHA-256", encoder.encode(text)));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
