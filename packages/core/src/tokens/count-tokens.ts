/**
 * Token counts with a real tokenizer: `o200k_base` (`gpt-tokenizer`), the encoding of current OpenAI
 * models; other models' tokenizers land within a few percent of it on text and JSON. The tables take
 * most of a second to load, so they load on the first count, never on import.
 */
import { createRequire } from "node:module";

interface Encoding {
  countTokens(text: string, options?: EncodeOptions): number;
  encode(text: string, options?: EncodeOptions): number[];
  decode(tokens: Iterable<number>): string;
}
interface EncodeOptions {
  readonly disallowedSpecial?: ReadonlySet<string>;
}

let encoding: Encoding | undefined;
// Text that spells a special token (`<|endoftext|>`) is counted as the text it is; the tokenizer's
// default would throw on it, and a tool's answer may well contain one.
const asPlainText: EncodeOptions = { disallowedSpecial: new Set() };

function load(): Encoding {
  encoding ??= createRequire(import.meta.url)("gpt-tokenizer/encoding/o200k_base") as Encoding;
  return encoding;
}

/**
 * A run of one character class longer than this (letters, symbols, whitespace, or characters past
 * ASCII: what the tokenizer merges as one piece) is counted in slices of this length. Merging one
 * piece costs the square of its length, so a tool answer of a million letters "A" would stall the
 * server for minutes; sliced, it costs what ordinary text does, and counts at most a token per slice
 * more.
 */
const longestRun = 128;
/** The tokens of `text` as a model reads it. */
export function countTokens(text: string): number {
  return countUpTo(text, Number.POSITIVE_INFINITY);
}

/** The tokens of a value as a model reads it: a string as it is, anything else as its JSON. */
export function tokensOf(value: unknown): number {
  return countTokens(typeof value === "string" ? value : (JSON.stringify(value) ?? "null"));
}

/**
 * Whether `text` fits `limit` tokens, stopping as soon as it does not: cheap on a long text, where
 * `countTokens(text) <= limit` would count it all.
 */
export function fitsTokens(text: string, limit: number): boolean {
  // No piece counted is longer than `longestRun` characters, nor is any token.
  if (text.length > (limit + 1) * longestRun) return false;
  return countUpTo(text, limit) <= limit;
}

/**
 * Text is counted a window at a time, each ending before a space that follows a word (where the
 * tokenizer's own pieces end too, so the sum is the count of the whole): a count that passes `limit`
 * stops there, and costs what the limit costs, not what the text does.
 */
const window = 16_384;

/** The tokens of `text`, or some number past `limit` as soon as it is clear the count exceeds it. */
function countUpTo(text: string, limit: number): number {
  let total = 0;
  for (let at = 0; at < text.length; ) {
    const end = windowEnd(text, at);
    total += countPiece(text.slice(at, end));
    if (total > limit) return total;
    at = end;
  }
  return total;
}

/**
 * About the longest start of `text` within `limit` tokens: the end (a character index) of the piece
 * counted as `fitsTokens` counts it, found in one pass. Windows and their parts are encoded until the
 * limit falls inside one part; that part's first tokens are decoded to find where they end. A
 * count is not quite monotone in the length, so a caller that must fit checks the piece it keeps
 * (`cutText` does); this costs about one count of the piece, where a search by counts cost several.
 */
export function prefixWithinTokens(text: string, limit: number): number {
  const encoding = load();
  let total = 0;
  // Characters a token, as counted so far: each window reaches a little past what the tokens left cover.
  let density = 2;
  for (let at = 0; at < text.length; ) {
    const size = Math.min(window, Math.max(256, Math.ceil((limit - total) * density) + 64));
    const end = windowEnd(text, at, size);
    const piece = text.slice(at, end);
    // Each part encoded once: its length is its count, and where the limit falls its tokens say where.
    for (const [from, to] of parts(piece)) {
      const ids = encoding.encode(piece.slice(from, to), asPlainText);
      if (total + ids.length <= limit) {
        total += ids.length;
        continue;
      }
      return at + from + decodedLength(piece.slice(from, to), ids.slice(0, limit - total));
    }
    at = end;
    density = at / Math.max(1, total);
  }
  return text.length;
}

/**
 * The token of the byte 0xFF, which no UTF-8 text holds: decoded, it ends whatever character the
 * tokenizer's decoder was left holding, as one U+FFFD of its own.
 */
const strayByteToken = 187;

/** How many characters of `part` its first tokens `ids` spell; a character they split is left out. */
function decodedLength(part: string, ids: readonly number[]): number {
  if (ids.length === 0) return 0;
  // gpt-tokenizer decodes through one streaming TextDecoder shared by every caller: the bytes of a
  // character split by the last token are kept, not answered as U+FFFD, and put before the next
  // decode's text, so the length found depended on what was decoded before. A stray byte first ends
  // what another decode left; one last ends the character these tokens split, and is dropped.
  const encoding = load();
  encoding.decode([strayByteToken]);
  const decoded = encoding.decode([...ids, strayByteToken]).slice(0, -1);
  let length = Math.min(decoded.length, part.length);
  // Bytes of a character split by the last token decode as U+FFFD; the character is not in the piece.
  while (length > 0 && decoded.charCodeAt(length - 1) !== part.charCodeAt(length - 1)) length -= 1;
  return length;
}

/**
 * Where the window of `size` characters that starts at `at` ends: before a space that follows a word
 * in its second half, else at its length.
 */
function windowEnd(text: string, at: number, size = window): number {
  const end = Math.min(text.length, at + size);
  if (end === text.length) return end;
  const space = text.lastIndexOf(" ", end);
  return space > at + size / 2 && !isSpace(text.charCodeAt(space - 1)) ? space : sliceEnd(text, at, end);
}

function countPiece(text: string): number {
  const encoding = load();
  let total = 0;
  for (const [from, to] of parts(text)) total += encoding.countTokens(text.slice(from, to), asPlainText);
  return total;
}

/**
 * The parts a piece is counted in, in order: the text between long runs as it is, and each run of one
 * character class longer than `longestRun` in slices of that length.
 */
function* parts(text: string): Generator<readonly [number, number]> {
  let at = 0;
  let runStart = 0;
  let runClass = -1;
  for (let index = 0; index <= text.length; index++) {
    const kind = index === text.length ? -2 : characterClass(text.charCodeAt(index));
    if (kind === runClass && kind >= 0) continue;
    if (runClass >= 0 && index - runStart > longestRun) {
      if (runStart > at) yield [at, runStart];
      for (let from = runStart; from < index; ) {
        const to = sliceEnd(text, from, Math.min(index, from + longestRun));
        yield [from, to];
        from = to;
      }
      at = index;
    }
    runStart = index;
    runClass = kind;
  }
  if (text.length > at) yield [at, text.length];
}

/** 0 whitespace, 1 ASCII letters, 2 other ASCII, 3 past ASCII; -1 digits (the tokenizer takes three at most). */
function characterClass(code: number): number {
  if (code <= 32) return 0;
  if (code >= 48 && code <= 57) return -1;
  if ((code >= 65 && code <= 90) || (code >= 97 && code <= 122)) return 1;
  return code < 128 ? 2 : 3;
}

function isSpace(code: number): boolean {
  return code === 32 || code === 9 || code === 10 || code === 13;
}

/** `end`, or one before it when it would split a surrogate pair. */
function sliceEnd(text: string, from: number, end: number): number {
  const before = text.charCodeAt(end - 1);
  return before >= 0xd800 && before <= 0xdbff && end - 1 > from ? end - 1 : end;
}
