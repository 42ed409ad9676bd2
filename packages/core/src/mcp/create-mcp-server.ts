/** `createMcpServer`: a Tackle tool set as an MCP server (tools/list and tools/call). */
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/server";
import { ToolDefinitionError } from "../errors/tool-definition-error.ts";
import { jsonSchema } from "../schema/schema.ts";
import type { AnyTool } from "../tool/define-tool.ts";
import type { CallOptions, ToolSet } from "../tool-set/create-tool-set.ts";
import { mcpCallOptions } from "./mcp-call-options.ts";
import { createResultPages, type ResultPages } from "./result-pages/create-result-pages.ts";
import { keepSentArguments } from "./sent-arguments.ts";
import { toCallToolResult } from "./to-call-tool-result.ts";

export interface McpServerOptions {
  /** The server name announced to clients. Default `tackle`. */
  readonly name?: string;
  /** The server version announced to clients. Default `0.1.0`. */
  readonly version?: string;
  /** Passed on to every `toolset.call` (identity, logger, time limit). */
  readonly callOptions?: Omit<CallOptions, "signal" | "callId" | "idempotencyKey" | "takeover">;
  /**
   * The token budget of every tool answer (ADR 0261): past it, the answer's first part, what was left
   * out and a cursor that the paging tool (`tackle.result_page`, listed beside the tools) reads on.
   * Default: `createResultPages()`, 8,000 tokens; `false` answers whole (a program reads them, not a
   * model). The serving functions share one between the servers of an endpoint.
   */
  readonly resultPages?: ResultPages | false;
  /**
   * Whose cursors this server's answers make and may read. Default: a fresh random owner, so one
   * server (one connection) reads only its own.
   */
  readonly owner?: string;
}

/**
 * A fresh MCP server exposing every tool of the set under its own name (MCP allows dots), with the
 * derived JSON Schemas and the tool's annotations. `toolset.call` validates: a refused or failed call
 * is an `isError` result whose `structuredContent.error` is the coded error `{ code, message,
 * retryable, data }`, so an MCP client (or a model behind one) can act on it. The MCP request's
 * abort signal reaches the tool.
 */
export function createMcpServer(toolset: ToolSet, options: McpServerOptions = {}): McpServer {
  assertServableOverMcp(toolset);
  const pages = options.resultPages ?? createResultPages();
  const owner = options.owner ?? randomUUID();
  assertPagingToolFree(toolset, pages);
  const server = new McpServer(
    { name: options.name ?? "tackle", version: options.version ?? "0.1.0" },
    {
      capabilities: { logging: {} },
      ...(pages === false
        ? {}
        : {
            instructions: `An answer past ${pages.budget} tokens is cut and ends with a cursor; ${pages.tool.name} reads the next part.`,
          }),
    },
  );
  withOwnNameRegistries(server);
  const sent = new WeakMap<object, unknown>();
  for (const tool of toolset.tools) {
    const outputSchema = objectOutputSchema(tool);
    server.registerTool(
      tool.name,
      {
        description: tool.description,
        // The schema of record is the tool's own; the SDK only advertises it and lets every value
        // through, so `toolset.call` is the one place input is judged.
        inputSchema: jsonSchema<Record<string, unknown>>(tool.inputJsonSchema),
        ...(outputSchema === undefined
          ? {}
          : { outputSchema: jsonSchema<Record<string, unknown>>(outputSchema) }),
        ...(tool.annotations?.title === undefined ? {} : { title: tool.annotations.title }),
        ...(tool.annotations === undefined ? {} : { annotations: { ...tool.annotations } }),
      },
      async (args: Record<string, unknown>, context) => {
        const result = toCallToolResult(
          await toolset.call(tool.name, sent.has(context) ? sent.get(context) : args, {
            ...options.callOptions,
            ...mcpCallOptions(context, options.callOptions?.logger, tool.name),
          }),
          tool.name,
        );
        // Past the budget, structured content the output schema describes is kept when it fits and
        // otherwise left out, the answer marked an error so a client does not reject it (ADR 0542).
        return pages === false
          ? result
          : pages.fit(result, owner, { tool: tool.name, outputSchema: outputSchema !== undefined });
      },
    );
  }
  keepSentArguments(server.server, sent);
  if (pages !== false) registerPagingTool(server, pages, owner);
  return server;
}

/**
 * The SDK's `McpServer` keeps tools, prompts and resources in plain objects looked up by the client's
 * name: a tool named `constructor` or `__proto__` reads as "already registered" (every request then
 * fails), and a call of `toString` as a "disabled" tool. Registries without a prototype hold every name
 * as their own and know no other (ADR 0546).
 */
function withOwnNameRegistries(server: McpServer): void {
  const fields = server as unknown as Record<string, unknown>;
  for (const field of [
    "_registeredTools",
    "_registeredPrompts",
    "_registeredResources",
    "_registeredResourceTemplates",
  ]) {
    const registry = fields[field];
    if (typeof registry === "object" && registry !== null) Object.setPrototypeOf(registry, null);
  }
}

/** Refuses a set that has a tool of the paging tool's name, naming it. */
export function assertPagingToolFree(toolset: ToolSet, pages: ResultPages | false): void {
  if (pages === false || toolset.get(pages.tool.name) === undefined) return;
  throw new ToolDefinitionError(
    "invalid_tool_definition",
    `Tool "${pages.tool.name}" cannot be served over MCP: the paging tool of cut answers has that name (pass another \`toolName\` to createResultPages, or resultPages: false)`,
    { name: pages.tool.name },
  );
}

function registerPagingTool(server: McpServer, pages: ResultPages, owner: string): void {
  const { name, description, inputSchema, annotations } = pages.tool;
  server.registerTool(
    name,
    {
      ...(description === undefined ? {} : { description }),
      inputSchema: jsonSchema<Record<string, unknown>>(inputSchema),
      ...(annotations === undefined ? {} : { annotations: { ...annotations } }),
    },
    async (args: Record<string, unknown>) => pages.page(args, owner),
  );
}

/**
 * MCP tools take an object. A tool whose input is anything else is refused here, naming it, rather
 * than letting the SDK fail every `tools/list` of the server later.
 */
export function assertServableOverMcp(toolset: ToolSet): void {
  for (const tool of toolset.tools) {
    if (tool.inputJsonSchema.type !== "object") {
      throw new ToolDefinitionError(
        "invalid_tool_definition",
        `Tool "${tool.name}" (${tool.source}) cannot be served over MCP: its input schema is not an object (type ${JSON.stringify(tool.inputJsonSchema.type)})`,
        { name: tool.name, source: tool.source },
      );
    }
  }
}

/** MCP output schemas describe objects; a tool with any other output shape advertises none. */
function objectOutputSchema(tool: AnyTool): Record<string, unknown> | undefined {
  return tool.outputJsonSchema?.type === "object" ? tool.outputJsonSchema : undefined;
}
