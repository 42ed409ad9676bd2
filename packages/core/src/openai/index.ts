/** `@tackle/core/openai`: OpenAI tool definitions from a tool set, and helpers that run the model's calls. Needs the optional peer `openai`. */
export type { OpenAICallOptions, ResultBudgetOption } from "./call-from-model.ts";
export type { ConcurrentCallsOption } from "./calls-at-once.ts";
export { type ChatMessageWithToolCalls, runChatToolCalls } from "./run-chat-tool-calls.ts";
export { type ResponseWithFunctionCalls, runResponseToolCalls } from "./run-response-tool-calls.ts";
export { toOpenAIChatTools, toOpenAIResponseTools } from "./to-openai-tools.ts";
