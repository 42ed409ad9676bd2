/** What an MCP request gives a tool call: its abort signal, progress notifications and log messages. */
import type { LoggingLevel, ServerContext } from "@modelcontextprotocol/server";
import { type Logger, silentLogger } from "../tool/logger.ts";
import type { CallOptions } from "../tool-set/create-tool-set.ts";

type McpCallOptions = Required<Pick<CallOptions, "signal" | "logger">> & Pick<CallOptions, "onProgress">;

/**
 * The request's abort signal; `onProgress` sending `notifications/progress` when the client gave a
 * progress token; and a logger that writes to `base` and, when the client asked for log messages
 * (the server declares the `logging` capability), sends them as `notifications/message` at or above
 * the client's level.
 */
export function mcpCallOptions(
  context: ServerContext,
  base: Logger = silentLogger,
  /** The log messages' `logger` field: the tool's name. */
  name = "tackle",
): McpCallOptions {
  const request = context.mcpReq;
  const token = request._meta?.progressToken;
  const send = (level: LoggingLevel, message: string, fields?: Record<string, unknown>) => {
    request.log(level, fields === undefined ? message : { message, ...fields }, name).catch(() => undefined);
  };
  const logger: Logger = {
    debug(message, fields) {
      base.debug(message, fields);
      send("debug", message, fields);
    },
    info(message, fields) {
      base.info(message, fields);
      send("info", message, fields);
    },
    warn(message, fields) {
      base.warn(message, fields);
      send("warning", message, fields);
    },
    error(message, fields) {
      base.error(message, fields);
      send("error", message, fields);
    },
  };
  return {
    signal: request.signal,
    logger,
    ...(token === undefined
      ? {}
      : {
          onProgress: (update) => {
            request
              .notify({ method: "notifications/progress", params: { progressToken: token, ...update } })
              .catch(() => undefined);
          },
        }),
  };
}
