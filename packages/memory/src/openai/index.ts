/** @tackle/memory/openai: memory for the OpenAI SDK — a client whose `create` injects and captures. */
export {
  createOpenAIMiddleware,
  type OpenAIClientLike,
  type OpenAIMiddlewareOptions,
} from "./create-openai-middleware.ts";
export type { DeferredApiPromise } from "./defer-api-promise.ts";
