/** `@tackle/durable/ai-sdk`: durable tools and a journaled model for the Vercel AI SDK. */
export type { DeclinedToolCall } from "../integration/run-integrated-tool.ts";
export { durableModel } from "./durable-model.ts";
export { withDurableTools } from "./with-durable-tools.ts";
