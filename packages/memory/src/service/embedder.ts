/** Wraps any AI SDK embedding model (provider spec v2, v3 or v4) into a batch embed function. */
import type { EmbeddingModelV3, EmbeddingModelV4 } from "@ai-sdk/provider";

/** Any AI SDK embedding model object; the service calls its `doEmbed` directly (no `ai` import). */
export type MemoryEmbeddingModel = EmbeddingModelV4 | EmbeddingModelV3;

export interface Embedder {
  readonly modelId: string;
  embed(values: readonly string[]): Promise<Float32Array[]>;
}

export function createEmbedder(model: MemoryEmbeddingModel): Embedder {
  return {
    modelId: `${model.provider}:${model.modelId}`,
    async embed(values) {
      if (values.length === 0) return [];
      const limit = (await model.maxEmbeddingsPerCall) ?? 2048;
      const vectors: Float32Array[] = [];
      for (let start = 0; start < values.length; start += limit) {
        const batch = values.slice(start, start + limit);
        const result = await model.doEmbed({ values: batch });
        for (const embedding of result.embeddings) vectors.push(normalize(Float32Array.from(embedding)));
      }
      return vectors;
    },
  };
}

function normalize(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let index = 0; index < vector.length; index += 1) vector[index]! /= norm;
  return vector;
}

/** Cosine similarity of two unit vectors. */
export function cosine(left: Float32Array, right: Float32Array): number {
  const length = Math.min(left.length, right.length);
  let dot = 0;
  for (let index = 0; index < length; index += 1) dot += left[index]! * right[index]!;
  return dot;
}
