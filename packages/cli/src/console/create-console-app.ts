/** The console's HTTP app: loopback guard, bearer token, then MCP (both protocol revisions, stateless). */
import { createMcpHandler } from "@modelcontextprotocol/server";
import { type Logger, loopbackViolation } from "@tackle/core";
import { Hono } from "hono";
import { createMcpServer } from "../mcp/create-mcp-server.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { bearerMatches } from "./console-token.ts";

export interface ConsoleAppOptions {
  readonly source: ToolSource;
  readonly token: string;
  readonly logger: Logger;
}

export interface ConsoleApp {
  readonly fetch: (request: Request) => Response | Promise<Response>;
  close(): Promise<void>;
}

export const consolePath = "/mcp";

export function createConsoleApp(options: ConsoleAppOptions): ConsoleApp {
  const { source, token, logger } = options;
  const mcp = createMcpHandler(() => createMcpServer(source), {
    onerror: (error) => logger.warn("console request failed", { error: error.message }),
  });
  const app = new Hono();
  // Every path, not only /mcp, so nothing on this port answers a rebinding page.
  app.use("*", async (context, next) => {
    const violation = loopbackViolation(context.req.raw.headers);
    if (violation !== undefined) {
      logger.warn("console refused a request", { reason: violation });
      return context.json({ error: { code: "forbidden", message: violation } }, 403);
    }
    if (!bearerMatches(context.req.header("authorization"), token)) {
      return context.json(
        {
          error: {
            code: "unauthorized",
            message: "A bearer token is required: the console printed its token file's path when it started",
          },
        },
        401,
        { "WWW-Authenticate": 'Bearer realm="tackle-console"' },
      );
    }
    return next();
  });
  app.all(consolePath, (context) => mcp.fetch(context.req.raw));
  return { fetch: app.fetch, close: () => mcp.close() };
}
