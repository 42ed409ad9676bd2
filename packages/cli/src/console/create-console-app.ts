/**
 * The console's HTTP app: loopback guard on every path; MCP (both protocol revisions; sessions for the
 * 2025 clients that keep one, session-less calls answered directly) behind the bearer token; the web page and its API (signed-in sessions) on the other paths.
 * Each credential holds a bounded number of requests and, apart, event streams (request-bounds.ts).
 */
import type { Logger } from "@tackle/core";
import { loopbackViolation } from "@tackle/core/internal";
import { Hono } from "hono";
import type { ApprovalCalls } from "../mcp/approval-calls.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { bearerMatches } from "./console-token.ts";
import { createMcpEndpoint, type McpSessionOptions } from "./mcp-endpoint.ts";
import {
  type ConsoleBounds,
  type ConsoleBoundsOptions,
  createConsoleBounds,
  kindOf,
  refusedMcp,
  servedInPlace,
  takePlace,
} from "./request-bounds.ts";
import { type ConsoleSessions, createConsoleSessions } from "./web/console-sessions.ts";

export interface ConsoleAppOptions extends ConsoleBoundsOptions {
  readonly source: ToolSource;
  readonly token: string;
  /** Where the token lives, named in a 401 so a client's user can find it. */
  readonly tokenFile?: string;
  readonly logger: Logger;
  /** Where the web page's demo durable runs live (a SQLite path); default in memory. */
  readonly runsStore?: string;
  /** Another process's durable HTTP server (loopback) whose runs the runs page shows and approves. */
  readonly durableUrl?: string;
  /** How many MCP sessions it holds and for how long (see `createMcpEndpoint`). */
  readonly mcpSessions?: McpSessionOptions;
  /** Tokens (o200k) of one tool answer a model reads; past it, a part, a summary and a cursor. Default 8,000. */
  readonly resultBudget?: number;
  /** Tool calls that wait for a person's approval; the console closes them with itself. */
  readonly approvals?: ApprovalCalls;
}

export interface ConsoleApp {
  readonly fetch: (request: Request) => Response | Promise<Response>;
  /** The web page's sign-in: its one-time code and its sessions. */
  readonly sessions: ConsoleSessions;
  /** The places each credential holds (ADR 0270). */
  readonly bounds: ConsoleBounds;
  /** MCP sessions held now (for tests and logs). */
  readonly mcpSessionCount: number;
  close(): Promise<void>;
}

export const consolePath = "/mcp";

function tokenFileName(path: string | undefined): string {
  return path ?? "the token file the console printed when it started ($TACKLE_HOME/console-token)";
}

export function createConsoleApp(options: ConsoleAppOptions): ConsoleApp {
  const { source, token, logger } = options;
  const bounds = createConsoleBounds(options);
  const mcp = createMcpEndpoint(source, logger, {
    ...options.mcpSessions,
    ...(options.resultBudget === undefined ? {} : { resultBudget: options.resultBudget }),
    ...(options.approvals === undefined ? {} : { approvals: options.approvals }),
  });
  const sessions = createConsoleSessions({ token });
  // Imported when a console is created, not when this module loads: other commands (and --help) do not
  // pay for the page and the durable runner.
  const web = import("./web/create-web-app.ts").then(({ createWebApp }) =>
    createWebApp({
      source,
      token,
      sessions,
      bounds,
      logger,
      ...(options.runsStore === undefined ? {} : { runsStore: options.runsStore }),
      ...(options.durableUrl === undefined ? {} : { durableUrl: options.durableUrl }),
    }),
  );
  // A page that cannot start (its runs store unreadable, say) leaves MCP serving: its paths answer 503
  // with the reason instead of a bare 500, and closing the console does not fail on it.
  let webFailure: string | undefined;
  web.catch((error: Error) => {
    webFailure = error.message;
    logger.error("console page failed to load", { error: error.message });
  });
  const app = new Hono();
  // No answer of this port may be loaded by a page of another origin, even one the browser counts as
  // the same site (another loopback port gets the SameSite cookie): not as a script, image or frame.
  app.use("*", async (context, next) => {
    await next();
    const headers = new Headers(context.res.headers);
    headers.set("cross-origin-resource-policy", "same-origin");
    headers.set("x-content-type-options", "nosniff");
    context.res = new Response(context.res.body, {
      status: context.res.status,
      statusText: context.res.statusText,
      headers,
    });
  });
  // Every path, not only /mcp, so nothing on this port answers a rebinding page.
  app.use("*", async (context, next) => {
    const violation = loopbackViolation(context.req.raw.headers);
    if (violation !== undefined) {
      logger.warn("console refused a request", { reason: violation });
      return context.json({ error: { code: "forbidden", message: violation } }, 403);
    }
    return next();
  });
  // No OAuth here (ADR 0263): the metadata an OAuth client looks for first answers what to do instead.
  app.all("/.well-known/*", (context) =>
    context.json(
      {
        error: {
          code: "no_oauth",
          message: `This console does not use OAuth: send its bearer token (Authorization: Bearer <token>), the contents of ${tokenFileName(options.tokenFile)}, or run tackle mcp (MCP over stdio, no token); tackle mcp --print-config prints both entries for common clients`,
        },
      },
      404,
    ),
  );
  app.use(consolePath, async (context, next) => {
    const authorization = context.req.header("authorization");
    if (!bearerMatches(authorization, token)) {
      // A missing token and a wrong one are told apart: the fixes differ (send one; use the right file).
      const missing = authorization === undefined || !/^Bearer\s+\S+/i.test(authorization);
      const file = tokenFileName(options.tokenFile);
      const message = missing
        ? `A bearer token is required (Authorization: Bearer <token>): the token is the contents of ${file}. A client that cannot send the header can run tackle mcp instead (MCP over stdio, no token); tackle mcp --print-config prints the entries for common MCP clients`
        : `The bearer token is wrong: it does not match this console's token file, ${file} (a restarted console with another TACKLE_HOME has another token)`;
      return context.json({ error: { code: missing ? "unauthorized" : "invalid_token", message } }, 401, {
        "WWW-Authenticate": `Bearer realm="tackle-console"${missing ? "" : ', error="invalid_token"'}, error_description="${message.replaceAll('"', "'").replace(/[^\x20-\x7e]/g, "?")}"`,
      });
    }
    return next();
  });
  // The token's place is taken here, past its check and before the body is read (ADR 0270).
  app.all(consolePath, (context) => {
    const request = context.req.raw;
    const kind = kindOf(request, true);
    const place = takePlace(bounds, "token", kind, request);
    if (place === undefined) return refusedMcp(bounds, "token", kind);
    return servedInPlace(place, request, () => mcp.fetch(request, { place, bounds }));
  });
  app.all("*", async (context) => {
    const page = await web.catch(() => undefined);
    if (page === undefined) {
      return context.json(
        {
          error: {
            code: "page_unavailable",
            message: `The console's web page failed to start: ${webFailure ?? "unknown error"}. MCP at ${consolePath} still answers.`,
          },
        },
        503,
      );
    }
    return page.app.fetch(context.req.raw);
  });
  return {
    fetch: app.fetch,
    sessions,
    bounds,
    get mcpSessionCount() {
      return mcp.sessionCount;
    },
    async close() {
      await mcp.close();
      await options.approvals?.close();
      await (await web.catch(() => undefined))?.close();
    },
  };
}
