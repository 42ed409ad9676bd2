/**
 * The log level an MCP client asked for on a request, read the way the SDK itself filters log
 * messages: on 2026-07-28 the level the request carries in its `_meta`; on 2025 the level the
 * client's `logging/setLevel` set on its session (a console session, a `tackle mcp` connection).
 */
import {
  LOG_LEVEL_META_KEY,
  type LoggingLevel,
  type Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import type { SourceCallOptions } from "../tool-source/tool-source.ts";

/** The least severe level the client wants log messages at for this request; undefined when it asked for none. */
export function requestedLogLevel(server: Server, context: ServerContext): LoggingLevel | undefined {
  // The SDK types the envelope as an empty object; its keys are the reserved `_meta` names.
  const envelope = context.mcpReq.envelope as Readonly<Record<string, unknown>> | undefined;
  if (envelope !== undefined) return envelope[LOG_LEVEL_META_KEY] as LoggingLevel | undefined;
  // The SDK keeps 2025 sessions' levels in a private map, by session id (none for a stateless server).
  const levels = (server as unknown as { _loggingLevels?: unknown })._loggingLevels;
  if (!(levels instanceof Map)) return undefined;
  return (levels.get(context.sessionId) ?? levels.get(undefined)) as LoggingLevel | undefined;
}

/** The tool logger's level that lets through every line the client's level does (none for critical and above). */
export function toolLogLevel(level: LoggingLevel | undefined): SourceCallOptions["logLevel"] {
  switch (level) {
    case "debug":
    case "info":
      return level;
    case "notice":
    case "warning":
      return "warn";
    case "error":
      return "error";
    default:
      return undefined;
  }
}
