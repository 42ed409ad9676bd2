/**
 * @tackle/core/internal: plumbing Tackle's own packages share (error brands, the loopback check, tool
 * names for LLMs, tracing, the per-key places of the in-flight bounds, an MCP call's arguments as
 * sent). Not for users: it changes with the packages, without a major version.
 */
export { hasBrand, setBrand } from "../errors/brand.ts";
export { jsonText, notJsonOutput } from "../errors/error-for-model.ts";
export { formatIssues } from "../errors/invalid-input-error.ts";
export { isLoopbackHost, loopbackViolation } from "../http/loopback.ts";
export { createPlaces, type Places, type PlacesOptions } from "../http/places.ts";
export {
  checkedMaxRetries,
  type RetryClock,
  realClock,
  refusedRetryDelay,
  sendRefusedAgain,
} from "../http/retry-refused.ts";
export { keepSentArguments } from "../mcp/sent-arguments.ts";
export { toolContentKey } from "../tool/tool-content.ts";
export { llmNamePattern, toLlmName } from "../tool-set/llm-name.ts";
export { traceToolCall } from "../tracing/trace-tool-call.ts";
export { ownValue, setOwn } from "./own-keys.ts";
