/** `@tackle/core/langchain`: a Tackle tool set as LangChain structured tools. Needs the optional peer `@langchain/core`. */
export { type LangChainToolsOptions, toLangChainTools } from "./to-langchain-tools.ts";
