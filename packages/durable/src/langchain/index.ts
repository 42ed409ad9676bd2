/** `@tackle/durable/langchain`: durable LangChain tools. */
export type { DeclinedToolCall } from "../integration/run-integrated-tool.ts";
export { withDurableTools } from "./with-durable-tools.ts";
