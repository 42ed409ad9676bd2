/**
 * Token counts with a real tokenizer: `o200k_base` (`gpt-tokenizer`), the encoding of current OpenAI
 * models; other models' tokenizers land within a few percent of it on text and JSON. The tables take
 * most of a second to load, so they load on the first count, never on import.
 */
import { createRequire } from "node:module";

interface Encoding {
  countTokens(text: string, options?: EncodeOptions): number;
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
    let end = Math.min(text.length, at + window);
    if (end < text.length) {
      const space = text.lastIndexOf(" ", end);
      end = space > at + window / 2 && !isSpace(text.charCodeAt(space - 1)) ? space : sliceEnd(text, at, end);
    }
    total += countPiece(text.slice(at, end));
    if (total > limit) return total;
    at = end;
  }
  return total;
}

function countPiece(text: string): number {
  const encoding = load();
  let total = 0;
  let at = 0;
  let runStart = 0;
  let runClass = -1;
  for (let index = 0; index <= text.length; index++) {
    const kind = index === text.length ? -2 : characterClass(text.charCodeAt(index));
    if (kind === runClass && kind >= 0) continue;
    if (runClass >= 0 && index - runStart > longestRun) {
      total += encoding.countTokens(text.slice(at, runStart), asPlainText);
      for (let from = runStart; from < index; ) {
        const to = sliceEnd(text, from, Math.min(index, from + longestRun));
        total += encoding.countTokens(text.slice(from, to), asPlainText);
        from = to;
      }
      at = index;
    }
    runStart = index;
    runClass = kind;
  }
  return total + encoding.countTokens(text.slice(at), asPlainText);
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
