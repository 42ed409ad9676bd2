/** @tackle/cli: the `tackle` command's pieces — the loopback MCP console and the tool sources behind it. */

export { consoleTokenPath, tackleHome } from "./config/tackle-home.ts";
export { type ConsoleToken, ensureConsoleToken, readConsoleToken } from "./console/console-token.ts";
export { type ConsoleOptions, type RunningConsole, startConsole } from "./console/start-console.ts";
export {
  type ApprovalCalls,
  type ApprovalCallsOptions,
  createApprovalCalls,
} from "./mcp/approval-calls.ts";
export { createMcpServer, modulesToolName } from "./mcp/create-mcp-server.ts";
export { builtinModules, builtinModulesSetting, type ModuleEntry } from "./modules/builtin-modules.ts";
export { CliError, type CliErrorCode } from "./program/cli-error.ts";
export { createProgram } from "./program/create-program.ts";
export type { ProgramContext } from "./program/program-context.ts";
export {
  type ConsoleSourceOptions,
  createConsoleToolSource,
} from "./tool-source/create-console-tool-source.ts";
export { createEmbeddedToolSource, type EmbeddedModule } from "./tool-source/create-embedded-tool-source.ts";
export { createMeshToolSource, type MeshClientLike } from "./tool-source/create-mesh-tool-source.ts";
export type {
  ModuleInfo,
  SourceCallOptions,
  SourceError,
  ToolInfo,
  ToolSource,
} from "./tool-source/tool-source.ts";
