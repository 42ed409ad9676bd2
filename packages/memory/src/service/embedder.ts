/** Wraps any AI SDK embedding model (provider spec v2, v3 or v4) into a batch embed function. */
import type { EmbeddingModelV3, EmbeddingModelV4 } from "@ai-sdk/provider";
import { MemoryError } from "../errors/memory-error.ts";

/** Any AI SDK embedding model object; the service calls its `doEmbed` directly (no `ai` import). */
export type MemoryEmbeddingModel = EmbeddingModelV4 | EmbeddingModelV3;

export interface Embedder {
  readonly modelId: string;
  embed(values: readonly string[]): Promise<Float32Array[]>;
}

/** How long one call to the embedding model may take by default. */
export const defaultEmbeddingTimeoutMs = 30_000;

/**
 * Each call to the model has `timeoutMs`: past it the model's abort signal aborts and the operation
 * fails `unavailable` (retryable), even when the model ignores its signal.
 */
export function createEmbedder(model: MemoryEmbeddingModel, timeoutMs = defaultEmbeddingTimeoutMs): Embedder {
  const modelId = `${model.provider}:${model.modelId}`;
  const embedBatch = async (values: string[]) => {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new MemoryError(
          "unavailable",
          `The embedding model ${modelId} did not answer within ${timeoutMs} ms`,
          503,
          { retryable: true, data: { model: modelId, timeoutMs } },
        );
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    try {
      return await Promise.race([model.doEmbed({ values, abortSignal: controller.signal }), deadline]);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    modelId,
    async embed(values) {
      if (values.length === 0) return [];
      const limit = (await model.maxEmbeddingsPerCall) ?? 2048;
      const vectors: Float32Array[] = [];
      for (let start = 0; start < values.length; start += limit) {
        const batch = values.slice(start, start + limit);
        const result = await embedBatch(batch);
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
