/**
 * Whether a screenshot's look changed, so `npm run screenshots` rewrites only the pictures that did:
 * two runs of the browser tests never give the same bytes (clock times, run and order ids), and a
 * committed PNG rewritten for those alone is churn. Chromium's PNGs (8-bit RGB or RGBA, not
 * interlaced) are decoded here with node:zlib; any other PNG counts as changed.
 */
import { copyFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { inflateSync } from "node:zlib";

export interface Pixels {
  readonly width: number;
  readonly height: number;
  /** Bytes per pixel: 3 (RGB) or 4 (RGBA). */
  readonly channels: number;
  readonly data: Uint8Array;
}

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG; undefined for anything else. */
export function decodePng(file: Uint8Array): Pixels | undefined {
  const signature = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  if (file.length < 8 || signature.some((byte, index) => file[index] !== byte)) return undefined;
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Uint8Array[] = [];
  for (let at = 8; at + 8 <= file.length; ) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...file.subarray(at + 4, at + 8));
    const body = file.subarray(at + 8, at + 8 + length);
    if (type === "IHDR") {
      width = view.getUint32(at + 8);
      height = view.getUint32(at + 12);
      const [depth, colour, , , interlace] = body.subarray(8, 13);
      if (depth !== 8 || interlace !== 0 || (colour !== 2 && colour !== 6)) return undefined;
      channels = colour === 2 ? 3 : 4;
    } else if (type === "IDAT") {
      idat.push(body);
    } else if (type === "IEND") {
      break;
    }
    at += 12 + length;
  }
  if (width === 0 || height === 0 || channels === 0) return undefined;
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(idat));
  } catch {
    return undefined;
  }
  const stride = width * channels;
  if (raw.length < height * (stride + 1)) return undefined;
  const data = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = y * stride;
    const above = out - stride;
    for (let x = 0; x < stride; x++) {
      const left = x >= channels ? (data[out + x - channels] as number) : 0;
      const up = y > 0 ? (data[above + x] as number) : 0;
      const upLeft = y > 0 && x >= channels ? (data[above + x - channels] as number) : 0;
      let predicted: number;
      if (filter === 0) predicted = 0;
      else if (filter === 1) predicted = left;
      else if (filter === 2) predicted = up;
      else if (filter === 3) predicted = (left + up) >> 1;
      else if (filter === 4) predicted = paeth(left, up, upLeft);
      else return undefined;
      data[out + x] = ((line[x] as number) + predicted) & 0xff;
    }
  }
  return { width, height, channels, data };
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

export interface LookComparison {
  readonly changed: boolean;
  /** Why, in words (for the script's report). */
  readonly reason: string;
}

/**
 * The share of pixels that may differ with the look unchanged: clock times, run ids and order ids
 * redrawn (two runs' runs page differ in 0.25% of its pixels, its memory page in 0.03%), not a moved
 * block or a new control. A change smaller than that (one button's colour) is not seen:
 * `npm run screenshots -- --all` writes every picture.
 */
export const sameLookShare = 0.005;

/** Compares two PNG files: changed when either cannot be decoded, the sizes differ, or more than `maxShare` of the pixels differ. */
export function compareLook(before: Uint8Array, after: Uint8Array, maxShare = sameLookShare): LookComparison {
  const a = decodePng(before);
  const b = decodePng(after);
  if (a === undefined || b === undefined) return { changed: true, reason: "not a PNG this script reads" };
  if (a.width !== b.width || a.height !== b.height)
    return { changed: true, reason: `size ${a.width}×${a.height} → ${b.width}×${b.height}` };
  let differing = 0;
  const pixels = a.width * a.height;
  for (let index = 0; index < pixels; index++) {
    // RGB only (alpha, when present, is 255 in a page screenshot); a step of a few levels is anti-aliasing.
    for (let channel = 0; channel < 3; channel++) {
      const left = a.data[index * a.channels + channel] as number;
      const right = b.data[index * b.channels + channel] as number;
      if (Math.abs(left - right) > 8) {
        differing++;
        break;
      }
    }
  }
  const share = differing / pixels;
  const shown = `${differing} of ${pixels} pixels (${(share * 100).toFixed(3)}%) differ`;
  return share > maxShare ? { changed: true, reason: shown } : { changed: false, reason: shown };
}

export interface ScreenshotUpdate {
  readonly name: string;
  readonly written: boolean;
  readonly reason: string;
}

/**
 * Copies each PNG of `fresh` into `target` when it is new there or its look changed; a PNG whose look
 * is the same stays as committed, byte for byte.
 */
export function updateScreenshots(fresh: string, target: string, all = false): ScreenshotUpdate[] {
  const updates: ScreenshotUpdate[] = [];
  for (const name of readdirSync(fresh)
    .filter((file) => file.endsWith(".png"))
    .sort()) {
    const from = join(fresh, name);
    const to = join(target, name);
    if (!existsSync(to)) {
      copyFileSync(from, to);
      updates.push({ name, written: true, reason: "new" });
      continue;
    }
    const comparison = all
      ? { changed: true, reason: "--all" }
      : compareLook(readFileSync(to), readFileSync(from));
    if (comparison.changed) copyFileSync(from, to);
    updates.push({ name, written: comparison.changed, reason: comparison.reason });
  }
  return updates;
}
