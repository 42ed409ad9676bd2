/**
 * A tool call from the page as an MCP client makes it: a server over the console's tool source (the
 * very server `/mcp` and `tackle mcp` build) and a client, linked in process, with the client asking
 * for progress and every log line. Each JSON-RPC message of the call crosses the link as it is, so the
 * page shows the exchange itself, its progress and log notifications as they come, and the
 * `CallToolResult` with its `structuredContent`.
 */
import { Client } from "@modelcontextprotocol/client";
import { type CallToolResult, InMemoryTransport, type JSONRPCMessage } from "@modelcontextprotocol/server";
import { createMcpServer, resultBudgetMetaKey } from "../../mcp/create-mcp-server.ts";
import type { ToolSource } from "../../tool-source/tool-source.ts";

/** One JSON-RPC message of the call: `sent` by the page's client, `received` from the server. */
export interface RpcMessage {
  readonly direction: "sent" | "received";
  /** Milliseconds since the call was sent. */
  readonly at: number;
  readonly message: JSONRPCMessage;
}

/** The call's outcome in the page's terms, beside the MCP result it was read from. */
export type PageAnswer = (
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly error: { readonly code: string; readonly message: string } }
) & { readonly ms: number; readonly result: CallToolResult };

export interface CallOverMcpOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** Each message of the call's exchange, as it crosses. */
  readonly onMessage: (message: RpcMessage) => void;
}

export async function callOverMcp(
  source: ToolSource,
  tool: string,
  args: Record<string, unknown>,
  options: CallOverMcpOptions,
): Promise<PageAnswer> {
  const server = createMcpServer(source);
  const client = new Client({ name: "tackle-console-page", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  try {
    // Every line the tool writes: a person reading its log wants the debug lines too.
    await client.setLoggingLevel("debug");
    // From here on, each message of the call is recorded as it crosses the link.
    const started = performance.now();
    const at = () => Math.round((performance.now() - started) * 10) / 10;
    const send = clientSide.send.bind(clientSide);
    clientSide.send = async (message, sendOptions) => {
      options.onMessage({ direction: "sent", at: at(), message });
      return send(message, sendOptions);
    };
    const receive = clientSide.onmessage;
    clientSide.onmessage = (message, extra) => {
      options.onMessage({ direction: "received", at: at(), message });
      receive?.(message, extra);
    };
    const result = (await client.callTool(
      // The page shows whole results: a person scrolls, a model's budget is not theirs.
      { name: tool, arguments: args, _meta: { [resultBudgetMetaKey]: "none" } },
      {
        // Asking for progress is what puts a progress token on the request.
        onprogress: () => {},
        timeout: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
    )) as CallToolResult;
    const ms = at();
    // The notifications the SDK hands on after the result reach the recorder before the answer goes.
    await new Promise((resolve) => setImmediate(resolve));
    return { ...readResult(result), ms, result };
  } finally {
    await client.close().catch(() => {});
    await server.close().catch(() => {});
  }
}

/** The page's outcome: the coded error of a failed call, else the structured output or the text's JSON. */
function readResult(
  result: CallToolResult,
): { ok: true; output: unknown } | { ok: false; error: { code: string; message: string } } {
  const text =
    result.content.length === 1 && result.content[0]?.type === "text" ? result.content[0].text : "";
  if (result.isError === true) {
    const coded = (result.structuredContent as { error?: { code?: unknown; message?: unknown } } | undefined)
      ?.error;
    return typeof coded?.code === "string" && typeof coded.message === "string"
      ? { ok: false, error: coded as { code: string; message: string } }
      : { ok: false, error: { code: "tool_error", message: text } };
  }
  if (result.structuredContent !== undefined) return { ok: true, output: result.structuredContent };
  if (text === "") return { ok: true, output: result.content };
  try {
    return { ok: true, output: JSON.parse(text) };
  } catch {
    return { ok: true, output: text };
  }
}
