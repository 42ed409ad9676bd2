/**
 * Which session-less `tools/call` requests the console's MCP endpoint answers itself (exactly a
 * JSON-RPC request with `name`, optional `arguments` and, on 2026-07-28, the envelope of protocol
 * version, client info and capabilities, the headers agreeing with the body), and how its answer is
 * projected as the SDK's servers project one. Anything else is the SDK's to serve.
 */
import type { CallToolResult } from "@modelcontextprotocol/server";
import { asksUnbudgeted, resultBudgetMetaKey } from "../mcp/create-mcp-server.ts";

export const modernRevision = "2026-07-28";
const protocolVersionKey = "io.modelcontextprotocol/protocolVersion";
const clientInfoKey = "io.modelcontextprotocol/clientInfo";
const clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities";
/** The 2025 revisions a session-less `tools/call` is answered directly for (the header names one). */
export const legacyRevisions = new Set(["2025-03-26", "2025-06-18", "2025-11-25"]);

export interface DirectCall {
  readonly id: string | number;
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly revision: string;
  /** The request asked for the whole result (`resultBudgetMetaKey`). */
  readonly unbudgeted: boolean;
}

/**
 * A session-less `tools/call` this endpoint answers itself, or undefined for the SDK to serve: exactly
 * a JSON-RPC request with `name`, optional `arguments` and (2026-07-28) the envelope of protocol
 * version, client info and capabilities, with the headers agreeing with the body.
 */
export function directCall(headers: Headers, message: unknown): DirectCall | undefined {
  if (!isRecord(message) || message.jsonrpc !== "2.0" || message.method !== "tools/call") return undefined;
  if (!onlyKeys(message, ["jsonrpc", "id", "method", "params"])) return undefined;
  const { id, params } = message;
  if (!(typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id)))) return undefined;
  if (
    !isRecord(params) ||
    typeof params.name !== "string" ||
    !onlyKeys(params, ["name", "arguments", "_meta"])
  )
    return undefined;
  const args = params.arguments ?? {};
  if (!isRecord(args)) return undefined;
  if (!(headers.get("accept") ?? "").includes("application/json")) return undefined;
  const revision = headers.get("mcp-protocol-version");
  if (revision === modernRevision) {
    const meta = params._meta;
    if (
      !isRecord(meta) ||
      !onlyKeys(meta, [protocolVersionKey, clientInfoKey, clientCapabilitiesKey, resultBudgetMetaKey])
    )
      return undefined;
    if (meta[resultBudgetMetaKey] !== undefined && !asksUnbudgeted(meta)) return undefined;
    if (meta[protocolVersionKey] !== modernRevision || !isRecord(meta[clientCapabilitiesKey]))
      return undefined;
    const info = meta[clientInfoKey];
    if (
      info !== undefined &&
      !(isRecord(info) && typeof info.name === "string" && typeof info.version === "string")
    )
      return undefined;
    if (headers.get("mcp-method") !== "tools/call" || headers.get("mcp-name") !== params.name)
      return undefined;
    return { id, name: params.name, args, revision, unbudgeted: asksUnbudgeted(meta) };
  }
  // A 2025 request carries no envelope; `_meta` (a progress token) needs the SDK's streaming. The
  // SDK's 2025 transport wants both media types accepted.
  if (revision === null || !legacyRevisions.has(revision) || params._meta !== undefined) return undefined;
  if (!(headers.get("accept") ?? "").includes("text/event-stream")) return undefined;
  if (headers.get("mcp-method") !== null || headers.get("mcp-name") !== null) return undefined;
  return { id, name: params.name, args, revision, unbudgeted: false };
}

/** Whether a message claims the 2026-07-28 envelope (such an `initialize` is the SDK's to refuse). */
export function hasModernClaim(message: Record<string, unknown>): boolean {
  return (
    isRecord(message.params) && isRecord(message.params._meta) && protocolVersionKey in message.params._meta
  );
}

/**
 * As the SDK's servers project a result: structured content that is not an object also comes as text,
 * and on the 2025 revisions it is wrapped as `{ result }` (structured content is an object there).
 */
export function project(result: CallToolResult, revision: string): CallToolResult {
  const structured = result.structuredContent as unknown;
  if (structured === undefined) return result;
  if (typeof structured === "object" && structured !== null && !Array.isArray(structured)) return result;
  const withText = result.content.some((block) => block.type === "text")
    ? result
    : {
        ...result,
        content: [...result.content, { type: "text" as const, text: JSON.stringify(structured) }],
      };
  return revision === modernRevision ? withText : { ...withText, structuredContent: { result: structured } };
}
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function onlyKeys(record: Record<string, unknown>, allowed: readonly string[]): boolean {
  for (const key in record) if (!allowed.includes(key)) return false;
  return true;
}
