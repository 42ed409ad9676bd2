/** @tackle/memory/ai-sdk: memory for AI SDK models — inject the context bundle, capture each turn. */
export { createMemoryMiddleware, type MemoryMiddlewareOptions } from "./create-memory-middleware.ts";
export { type WithMemoryOptions, withMemory } from "./with-memory.ts";
