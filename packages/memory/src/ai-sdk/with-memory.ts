/** `withMemory`: an AI SDK model that remembers — `wrapLanguageModel` with the memory middleware. */
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import { createMemoryMiddleware, type MemoryMiddlewareOptions } from "./create-memory-middleware.ts";

export type WithMemoryOptions = MemoryMiddlewareOptions;

export function withMemory(
  model: Parameters<typeof wrapLanguageModel>[0]["model"],
  options: WithMemoryOptions,
): LanguageModelV4 {
  return wrapLanguageModel({ model, middleware: createMemoryMiddleware(options) });
}
