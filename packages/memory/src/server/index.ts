/** `@tackle/memory/server`: the HTTP API (Hono) and `serveMemory()`. */
export {
  API_KEY_BINDING_FIELDS,
  type ApiKeyEntry,
  type ApiKeyGrant,
  type ApiKeyResolver,
  ApiKeysConfigError,
  apiKeyResolver,
  parseApiKeys,
} from "./api-keys.ts";
export { createMemoryApp, type MemoryAppOptions } from "./create-memory-app.ts";
export type { RateLimit } from "./rate-limiter.ts";
export { type MemoryRoute, memoryRoutes } from "./routes.ts";
export {
  DEFAULT_MEMORY_PORT,
  type MemoryServer,
  openMemoryStore,
  type ServeMemoryOptions,
  serveMemory,
} from "./serve-memory.ts";
