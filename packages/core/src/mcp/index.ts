/**
 * `@tackle/core/mcp`: a tool set as an MCP server (stdio, Streamable HTTP; both protocol revisions), and
 * an MCP client's tools as a tool set. Needs the optional peers `@modelcontextprotocol/server`,
 * `/client` and `/node`.
 */
export { createMcpServer, type McpServerOptions } from "./create-mcp-server.ts";
export { mcpCallOptions } from "./mcp-call-options.ts";
export {
  createResultPages,
  defaultResultBudget,
  type FitOptions,
  type ResultPages,
  type ResultPagesOptions,
} from "./result-pages/create-result-pages.ts";
export {
  createMcpHttpHandler,
  type McpHttpHandlerOptions,
  type McpHttpServeOptions,
  type McpHttpServer,
  type McpStdioOptions,
  serveMcpHttp,
  serveMcpStdio,
} from "./serve-mcp.ts";
export { toCallToolResult } from "./to-call-tool-result.ts";
export { type McpToolSetOptions, toolSetFromMcp } from "./tool-set-from-mcp.ts";
