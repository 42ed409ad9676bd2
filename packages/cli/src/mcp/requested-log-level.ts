/**
 * The log level an MCP client asked for on a request: on 2026-07-28 the level the request carries in
 * its `_meta`; on 2025 the level the client's `logging/setLevel` set on its session (a console
 * session, a `tackle mcp` connection). The server answers `logging/setLevel` with its own handler and
 * keeps the level itself: one server serves one session or connection.
 */
import {
  LOG_LEVEL_META_KEY,
  type LoggingLevel,
  type Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import type { Logger } from "@tackle/core";
import type { SourceCallOptions } from "../tool-source/tool-source.ts";

/** MCP's levels, least severe first (the protocol's order). */
const severity: readonly LoggingLevel[] = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency",
];

/**
 * Answers `logging/setLevel` on `server` (replacing the SDK's own handler) and returns what reads the
 * level a request asked for: undefined when its client asked for none.
 */
export function keepLogLevel(server: Server): (context: ServerContext) => LoggingLevel | undefined {
  let sessionLevel: LoggingLevel | undefined;
  server.setRequestHandler("logging/setLevel", (request) => {
    sessionLevel = request.params.level;
    return {};
  });
  return (context) => {
    // The SDK types the envelope as an empty object; its keys are the reserved `_meta` names.
    const envelope = context.mcpReq.envelope as Readonly<Record<string, unknown>> | undefined;
    if (envelope !== undefined) return envelope[LOG_LEVEL_META_KEY] as LoggingLevel | undefined;
    return sessionLevel;
  };
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

/** The MCP level a tool logger's line is sent at. */
const mcpLevelOf = { debug: "debug", info: "info", warn: "warning", error: "error" } as const;

/**
 * `logger`, passing on only the lines at or above the client's level (every line when it set none: the
 * SDK's default for a 2025 client, and on 2026-07-28 the SDK sends none without a level).
 */
export function atClientLevel(logger: Logger, level: LoggingLevel | undefined): Logger {
  if (level === undefined) return logger;
  const least = severity.indexOf(level);
  const passes = (line: keyof typeof mcpLevelOf) => severity.indexOf(mcpLevelOf[line]) >= least;
  return {
    debug(message, fields) {
      if (passes("debug")) logger.debug(message, fields);
    },
    info(message, fields) {
      if (passes("info")) logger.info(message, fields);
    },
    warn(message, fields) {
      if (passes("warn")) logger.warn(message, fields);
    },
    error(message, fields) {
      if (passes("error")) logger.error(message, fields);
    },
  };
}
