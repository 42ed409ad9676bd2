/**
 * @tackle/core: define a tool once; hand it to the AI SDK, the OpenAI SDK, LangChain or MCP. Plumbing the
 * Tackle packages share lives in `@tackle/core/internal`.
 */
export { controlFlowBrand, isControlFlow } from "./errors/control-flow.ts";
export { InvalidInputError, type ValidationIssue } from "./errors/invalid-input-error.ts";
export { InvalidOutputError } from "./errors/invalid-output-error.ts";
export { toToolError } from "./errors/to-tool-error.ts";
export { ToolAbortedError } from "./errors/tool-aborted-error.ts";
export { ToolDefinitionError, type ToolDefinitionErrorCode } from "./errors/tool-definition-error.ts";
export {
  type CoreToolError,
  type IssuesData,
  isNotFound,
  type NotFoundData,
  ToolError,
  type ToolErrorCode,
  type ToolErrorDataByCode,
  type ToolErrorOptions,
  type ToolErrorPayload,
} from "./errors/tool-error.ts";
export { ToolFailedError } from "./errors/tool-failed-error.ts";
export { ToolTimeoutError } from "./errors/tool-timeout-error.ts";
export { UnknownToolError } from "./errors/unknown-tool-error.ts";
export {
  type JsonSchema,
  type JsonSchemaOptions,
  jsonSchema,
  type StandardJSONSchemaV1,
  type StandardSchemaV1,
  type ToolSchema,
  toJsonSchema,
  type ValidationResult,
  validateWith,
} from "./schema/schema.ts";
export {
  type AnyTool,
  type ClientRequestOptions,
  defineTool,
  type ElicitAnswer,
  type ElicitRequest,
  type Identity,
  type Recovered,
  type Tool,
  type ToolAnnotations,
  type ToolClient,
  type ToolContext,
  type ToolDefinition,
  type ToolProgress,
  type ToolTakeover,
} from "./tool/define-tool.ts";
export { type Logger, silentLogger } from "./tool/logger.ts";
export {
  type ContentBlock,
  type EmbeddedResourceBlock,
  isToolContent,
  type MediaBlock,
  type ResourceLinkBlock,
  type TextBlock,
  type ToolContent,
  toolContent,
} from "./tool/tool-content.ts";
export {
  type CallOptions,
  createToolSet,
  DEFAULT_TIMEOUT_MS,
  type ToolCallResult,
  type ToolInput,
  type ToolNamed,
  type ToolOutput,
  type ToolSet,
  type ToolSetOf,
  type ToolSetOptions,
  type TypedToolSet,
} from "./tool-set/create-tool-set.ts";
export type { LlmName } from "./tool-set/llm-name.ts";
