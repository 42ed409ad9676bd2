/** `@tackle/core/ai-sdk`: a Tackle tool set as AI SDK 7 tools. Needs the optional peer `ai`. */
export {
  type AiSdkToolFailure,
  type AiSdkToolsOf,
  type AiSdkToolsOptions,
  isAiSdkToolFailure,
  toAiSdkTools,
} from "./to-ai-sdk-tools.ts";
