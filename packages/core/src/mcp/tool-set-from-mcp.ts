/** `toolSetFromMcp`: the tools an MCP client sees, as a Tackle tool set. */
import type { CallToolResult, Client, Tool as McpTool } from "@modelcontextprotocol/client";
import { ToolAbortedError } from "../errors/tool-aborted-error.ts";
import { ToolError } from "../errors/tool-error.ts";
import { jsonSchema } from "../schema/schema.ts";
import { type AnyTool, defineTool, type ToolAnnotations } from "../tool/define-tool.ts";
import { createToolSet, type ToolSet, type ToolSetOptions } from "../tool-set/create-tool-set.ts";

export interface McpToolSetOptions extends ToolSetOptions {
  /** Prepended as `prefix.` to every tool name, to keep several servers' tools apart. */
  readonly prefix?: string;
  /**
   * Ends the listing: it rejects with `aborted` at once and the server is told to cancel it; aborted
   * before, nothing is sent. Each page waits at most the MCP SDK's request timeout (60 s).
   */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Lists the connected server's tools (every page) and wraps each as a Tackle tool: its JSON Schema
 * through core's `jsonSchema()` (the server validates), its annotations, and a handler that calls it
 * with the call's abort signal. An `isError` result becomes a `ToolError`: the server's coded error when
 * it sent one (as Tackle servers do), else `tool_failed` with the server's text. An HTTP server's 429
 * (past its requests in flight, as `serveMcpHttp` answers) is a retryable `overloaded`.
 */
export async function toolSetFromMcp(client: Client, options: McpToolSetOptions = {}): Promise<ToolSet> {
  const { signal, ...toolSetOptions } = options;
  const listed: McpTool[] = [];
  let cursor: string | undefined;
  do {
    if (signal?.aborted) throw new ToolAbortedError("mcp.listTools", signal.reason);
    try {
      const page = await client.listTools(
        cursor === undefined ? {} : { cursor },
        signal === undefined ? {} : { signal },
      );
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } catch (error) {
      if (signal?.aborted) throw new ToolAbortedError("mcp.listTools", signal.reason);
      throw error;
    }
  } while (cursor !== undefined);
  const server = client.getServerVersion()?.name ?? "mcp server";
  const tools: AnyTool[] = listed.map((remote) =>
    defineTool({
      name: options.prefix === undefined ? remote.name : `${options.prefix}.${remote.name}`,
      description: remote.description ?? remote.title ?? "",
      input: jsonSchema(remote.inputSchema),
      ...(remote.annotations === undefined ? {} : { annotations: annotationsOf(remote) }),
      source: `mcp:${server}/${remote.name}`,
      async execute(input, context) {
        let result: CallToolResult;
        try {
          result = (await client.callTool(
            { name: remote.name, arguments: input as Record<string, unknown> },
            { signal: context.signal },
          )) as CallToolResult;
        } catch (error) {
          throw overloadedError(remote.name, error) ?? error;
        }
        if (result.isError === true) throw errorOf(remote.name, result);
        return outputOf(result);
      },
    }),
  );
  return createToolSet(tools, toolSetOptions);
}

function annotationsOf(remote: McpTool): ToolAnnotations {
  const { title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint } = remote.annotations ?? {};
  return Object.fromEntries(
    Object.entries({ title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint }).filter(
      ([, value]) => value !== undefined,
    ),
  );
}

/**
 * Structured content when the server sent it; else one text block, read as JSON when it is JSON (Tackle
 * servers write every output as JSON) and as plain text otherwise; else the content blocks.
 */
function outputOf(result: CallToolResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const [first, ...rest] = result.content ?? [];
  if (first?.type !== "text" || rest.length > 0) return result.content;
  try {
    return JSON.parse(first.text);
  } catch {
    return first.text; // prose from a server that does not write JSON
  }
}

function errorOf(tool: string, result: CallToolResult): ToolError {
  const error = (result.structuredContent as { error?: unknown } | undefined)?.error as
    | { code?: unknown; message?: unknown; retryable?: unknown; data?: unknown }
    | undefined;
  if (typeof error?.code === "string" && typeof error.message === "string") {
    return ToolError.fromPayload({
      code: error.code,
      message: error.message,
      retryable: error.retryable === true,
      data: error.data,
    });
  }
  const text = (result.content ?? [])
    .map((block) => (block.type === "text" ? block.text : `[${block.type}]`))
    .join("\n");
  return new ToolError("tool_failed", `MCP tool "${tool}" failed: ${text}`, {
    data: { tool, content: result.content },
  });
}

/**
 * The SDK's HTTP transport throws a non-OK answer as an `SdkHttpError` with the status and the body's
 * text; a 429 (a server past its requests in flight, ADR 0534) is `overloaded`, retryable, with the
 * server's JSON-RPC message and the seconds it asked to wait when it said them.
 */
function overloadedError(tool: string, error: unknown): ToolError | undefined {
  const http = (error as { data?: { status?: unknown; text?: unknown } } | undefined)?.data;
  if (!(error instanceof Error) || http?.status !== 429) return undefined;
  let said: { message?: unknown; data?: { retryAfterSeconds?: unknown } } | undefined;
  try {
    said = (JSON.parse(String(http.text)) as { error?: typeof said }).error;
  } catch {
    said = undefined; // not JSON-RPC: the SDK's own message says what came back
  }
  const reason = typeof said?.message === "string" ? said.message : error.message;
  const wait = said?.data?.retryAfterSeconds;
  return new ToolError("overloaded", `MCP server refused the call to "${tool}" (HTTP 429): ${reason}`, {
    retryable: true,
    data: { tool, ...(typeof wait === "number" ? { retryAfterSeconds: wait } : {}) },
    cause: error,
  });
}
