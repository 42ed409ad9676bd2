/**
 * The pages of a cut answer, as a property against oracles: thousands of random texts (nested JSON,
 * pretty or not, with escaped quotes and backslashes, unicode, surrogate pairs and emoji in strings
 * and keys; broken JSON; 200 levels deep; long lines without spaces; prose; CRLF; several of these
 * as the items of one answer), each paged at a random token limit, from one token to thousands:
 *
 * - the pages joined are the text, exactly; every page is non-empty, so paging ends;
 * - every page fits the limit by the counter the cut uses (`countTokens`), unless it is one character
 *   that alone does not;
 * - no page ends between the two halves of a surrogate pair;
 * - every page ends where the cut before ADR 0558 ended it (`cutTextBefore0558`, which read the text
 *   from its start on every cut), asked in order with the kept scans, and some again in a random order
 *   (a client may ask any page again) on one scan, its checkpoints every 1 to 4,096 characters;
 * - the JSON boundary of random windows, asked in a random order on one such scan, is the old one's.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of texts (default 2,000); `TACKLE_PROPERTY_SEED` replays
 * one. Randomness is `seededRandom` (mulberry32) of `@tackle/test-support`.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { cutText } from "../src/mcp/result-pages/cut-text.ts";
import { type ResultItem, type TextScans, takePage } from "../src/mcp/result-pages/result-items.ts";
import { checkpointSpacing, createTextScan } from "../src/mcp/result-pages/text-scan.ts";
import { countTokens } from "../src/tokens/count-tokens.ts";
import { cutTextBefore0558, jsonBoundaryBefore0558 } from "./support/cut-text-before-0558.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 2_000);
const seeds =
  process.env.TACKLE_PROPERTY_SEED === undefined
    ? Array.from({ length: rounds }, (_, index) => 558_000 + index)
    : [Number(process.env.TACKLE_PROPERTY_SEED)];

type Random = () => number;

/** Checkpoints of the scans asked out of order: every few characters, so they are many in a short text, or as shipped. */
const spacings = [1, 2, 3, 7, 64, checkpointSpacing];

const below = (random: Random, count: number) => Math.floor(random() * count);
const pick = <T>(random: Random, list: readonly T[]): T => list[below(random, list.length)] as T;
/** About evenly spread on a log scale over `[low, high]`. */
const logUniform = (random: Random, low: number, high: number) =>
  Math.floor(Math.exp(Math.log(low) + random() * (Math.log(high + 1) - Math.log(low))));

/** What strings and long lines are made of: what the scanner and the tokenizer must not trip on. */
const characters = [
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
  ...'"\\/,:{}[] \t\n\r',
  "é",
  "ß",
  "数",
  "据",
  "€",
  "😀",
  "🧪",
  "𝄞",
  "👩‍💻",
  "\u0000",
  "\u2028",
];

function randomString(random: Random, length: number): string {
  let text = "";
  while (text.length < length) text += pick(random, characters);
  return text;
}

function randomValue(random: Random, depth: number): unknown {
  const kind = depth <= 0 ? below(random, 4) : below(random, 7);
  if (kind === 0) return randomString(random, logUniform(random, 1, 40));
  if (kind === 1) return pick(random, [0, -0, 1e308, -1.5e-300, 42, 0.1 + 0.2, 2 ** 53]);
  if (kind === 2) return pick(random, [true, false, null]);
  if (kind === 3) return `${pick(random, ['a "quoted" word', "back\\slash", "\\\\", '\\"'])}`;
  const size = logUniform(random, 1, 12);
  if (kind <= 4) return Array.from({ length: size }, () => randomValue(random, depth - 1));
  return Object.fromEntries(
    Array.from({ length: size }, () => [
      randomString(random, logUniform(random, 1, 12)),
      randomValue(random, depth - 1),
    ]),
  );
}

/** Nested JSON of about `size` characters, pretty or not, with CRLF line ends or not. */
function randomJson(random: Random, size: number): string {
  const rows: unknown[] = [];
  for (let length = 2; length < size; ) {
    const row = randomValue(random, below(random, 5));
    rows.push(row);
    length += JSON.stringify(row).length + 1;
  }
  const value = random() < 0.5 ? rows : { rows, count: rows.length };
  const text = JSON.stringify(value, null, pick(random, [undefined, 2, "\t"]));
  return random() < 0.2 ? text.replaceAll("\n", "\r\n") : text;
}

function deepJson(random: Random, depth: number): string {
  let value: unknown = randomString(random, 20);
  for (let level = 0; level < depth; level++) {
    value = random() < 0.5 ? [value, level, "x,y"] : { [`k${level}`]: value, n: level };
  }
  return JSON.stringify(value);
}

function prose(random: Random, size: number, lineEnd: string): string {
  const words = ["the", "quick", "brown", "fox", "données", "数据库", "emoji😀", "a,b", "{not}", '"json"'];
  let text = "";
  while (text.length < size) text += `${pick(random, words)}${random() < 0.1 ? lineEnd : " "}`;
  return text;
}

/** One random text of about `size` characters, of one of the kinds a tool answers with. */
function randomText(random: Random, size: number): string {
  switch (below(random, 8)) {
    case 0:
    case 1:
      return randomJson(random, size);
    case 2:
      // Broken JSON: cut anywhere, stray closers and quotes inside, leading whitespace.
      return `${pick(random, ["", " ", "\n\t "])}${randomJson(random, size).slice(0, size)}${pick(random, ["", "]]]", '"', "\\"])}`;
    case 3:
      return deepJson(random, Math.min(200, Math.max(1, Math.floor(size / 12))));
    case 4:
      return randomString(random, size).replace(/[\s]/g, "x");
    case 5:
      return prose(random, size, pick(random, ["\n", "\r\n"]));
    case 6:
      return randomString(random, size);
    default:
      return `${randomJson(random, size / 2)}\n${prose(random, size / 2, "\r\n")}`;
  }
}

function isHigh(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** The piece from `start` as `takePage` answers a lone text item: at least one character (a whole pair). */
function progress(text: string, start: number, end: number): number {
  if (end > start) return end;
  return start + (isHigh(text.charCodeAt(start)) ? 2 : 1);
}

function checkPages(text: string, limit: number, random: Random): number {
  // In order, as the paging tool reads a kept answer: one item, its scans kept across pages.
  const scans: TextScans = new Map();
  const pieces: string[] = [];
  const starts: number[] = [];
  const oracleEnds: number[] = [];
  let at = 0;
  while (at < text.length) {
    starts.push(at);
    const oracleEnd = cutTextBefore0558(text, at, limit);
    oracleEnds.push(oracleEnd);
    const page = takePage([{ type: "text", text }], { item: 0, offset: at }, limit, scans);
    const piece = (page.items[0] as { text: string }).text;
    const end = page.next?.offset ?? text.length;
    assert.equal(end, at + piece.length, "a page is the text from its start");
    assert.equal(end, progress(text, at, oracleEnd), `the page from ${at} ends where the old cut ended it`);
    assert.ok(piece.length > 0, `the page from ${at} is not empty`);
    const single = piece.length === 1 || (piece.length === 2 && isHigh(piece.charCodeAt(0)));
    assert.ok(single || countTokens(piece) <= limit, `the page from ${at} fits ${limit} tokens`);
    if (end < text.length) {
      const low = text.charCodeAt(end);
      assert.ok(
        !(isHigh(text.charCodeAt(end - 1)) && low >= 0xdc00 && low <= 0xdfff),
        `${end} splits a pair`,
      );
    }
    pieces.push(piece);
    at = end;
  }
  assert.equal(pieces.join(""), text, "the pages joined are the text");
  // Some again, in a random order, some twice, on one scan: each cut as the old one.
  const scan = createTextScan(text, pick(random, spacings));
  const order = Array.from({ length: Math.min(6, starts.length) }, () => below(random, starts.length));
  for (const page of order) {
    assert.equal(
      cutText(text, starts[page] as number, limit, scan),
      oracleEnds[page],
      `page ${page} asked out of order`,
    );
  }
  return starts.length;
}

/** Random windows of `text`, in a random order on one scan: the JSON boundary is the old one's. */
function checkBoundaries(text: string, random: Random): void {
  const scan = createTextScan(text, pick(random, spacings));
  const isJson = /^\s*[[{]/.test(text);
  for (let ask = 0; ask < 24; ask++) {
    const start = below(random, text.length);
    const reach = start + 1 + below(random, text.length - start);
    const half = start + Math.ceil((reach - start) / 2);
    const expected = isJson ? jsonBoundaryBefore0558(text, half, reach) : undefined;
    assert.equal(scan.jsonBoundary(half, reach), expected, `the boundary in [${half}, ${reach})`);
  }
}

/** Several texts as one answer's items: pages with kept scans are the pages cut afresh. */
function checkItems(texts: readonly string[], limit: number): void {
  const items: ResultItem[] = texts.map((text) => ({ type: "text", text }));
  const scans: TextScans = new Map();
  let position: { item: number; offset: number } | undefined = { item: 0, offset: 0 };
  for (let page = 0; position !== undefined; page++) {
    const kept = takePage(items, position, limit, scans);
    assert.deepEqual(kept, takePage(items, position, limit), `page ${page} of ${texts.length} items`);
    position = kept.next;
  }
}

test(`pages of ${seeds.length} random texts: joined the text, each within the limit, cut where the old cut cut`, () => {
  let pages = 0;
  let characterCount = 0;
  for (const seed of seeds) {
    const random = seededRandom(seed);
    const size = logUniform(random, 1, 5_000);
    const text = randomText(random, size);
    // From one token a page to the whole text at once; at most about 60 pages a text.
    const limit = logUniform(random, Math.max(1, Math.ceil(text.length / 180)), 4_000);
    try {
      pages += checkPages(text, limit, random);
      checkBoundaries(text, random);
      if (random() < 0.1) checkItems([text, randomText(random, size / 3), randomText(random, size)], limit);
    } catch (error) {
      throw new Error(`seed ${seed} (TACKLE_PROPERTY_SEED=${seed} replays it): ${(error as Error).message}`, {
        cause: error,
      });
    }
    characterCount += text.length;
  }
  process.stdout.write(`# ${seeds.length} texts, ${characterCount} characters, ${pages} pages\n`);
});
