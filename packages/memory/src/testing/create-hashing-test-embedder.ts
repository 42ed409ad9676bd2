/**
 * A deterministic TEST embedder: an AI SDK embedding model (spec v4) that hashes word stems and
 * character trigrams into a fixed-size vector. No network, no model weights; the same text always
 * gives the same vector. It exists to test and benchmark fused ranking, not to understand meaning.
 */
import { createHash } from "node:crypto";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";

export interface HashingTestEmbedderOptions {
  /** Vector length (default 256). */
  readonly dimensions?: number;
}

/** Function words carry no topic; hashing them would make every sentence look alike. */
const stopWords = new Set(
  "a an and are as at be but by did do does for from had has have how i i'm in is it its me my of on or our so that the their them they this to was we were what when where which who whom why will with you your user user's".split(
    " ",
  ),
);

const suffixes = ["ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "er", "s"];

function stem(word: string): string {
  for (const suffix of suffixes) {
    if (word.length > suffix.length + 2 && word.endsWith(suffix)) return word.slice(0, -suffix.length);
  }
  return word;
}

function bucket(feature: string, dimensions: number): { index: number; sign: number } {
  const digest = createHash("md5").update(feature).digest();
  return { index: digest.readUInt32LE(0) % dimensions, sign: digest[4]! & 1 ? 1 : -1 };
}

export function embedTextForTest(text: string, dimensions = 256): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  for (const word of words) {
    if (stopWords.has(word)) continue;
    const stemmed = stem(word);
    const whole = bucket(`w:${stemmed}`, dimensions);
    vector[whole.index]! += whole.sign * 2;
    const padded = `^${stemmed}$`;
    for (let start = 0; start + 3 <= padded.length; start += 1) {
      const gram = bucket(`g:${padded.slice(start, start + 3)}`, dimensions);
      vector[gram.index]! += gram.sign * 0.5;
    }
  }
  return vector;
}

/** The test embedder, named as such in `status` (`tackle-test:hashing-test-embedder`). */
export function createHashingTestEmbedder(options: HashingTestEmbedderOptions = {}): EmbeddingModelV4 {
  const dimensions = options.dimensions ?? 256;
  return {
    specificationVersion: "v4",
    provider: "tackle-test",
    modelId: "hashing-test-embedder",
    maxEmbeddingsPerCall: 512,
    supportsParallelCalls: true,
    async doEmbed({ values }) {
      return { embeddings: values.map((value) => embedTextForTest(value, dimensions)), warnings: [] };
    },
  };
}
