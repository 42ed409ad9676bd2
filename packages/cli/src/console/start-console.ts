/** Starts the console on a loopback address and reports its URL. */
import { type ServerType, serve } from "@hono/node-server";
import type { Logger } from "@tackle/core";
import { isLoopbackHost } from "@tackle/core/internal";
import type { ListenAddress } from "@tackle/mesh";
import type { ApprovalCalls } from "../mcp/approval-calls.ts";
import { CliError } from "../program/cli-error.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { consolePath, createConsoleApp } from "./create-console-app.ts";
import type { McpSessionOptions } from "./mcp-endpoint.ts";

export interface ConsoleOptions {
  readonly source: ToolSource;
  readonly listen: ListenAddress;
  readonly token: string;
  /** Where the token lives, named in a 401. */
  readonly tokenFile?: string;
  readonly logger: Logger;
  /** Where the web page's demo durable runs live (a SQLite path); default in memory. */
  readonly runsStore?: string;
  /** Another process's durable HTTP server (loopback) whose runs the runs page shows and approves. */
  readonly durableUrl?: string;
  /** How many MCP sessions it holds and for how long. */
  readonly mcpSessions?: McpSessionOptions;
  /** Tokens (o200k) of one tool answer a model reads; past it, a part, a summary and a cursor. Default 8,000. */
  readonly resultBudget?: number;
  /** Tool calls that wait for a person's approval; the console closes them with itself. */
  readonly approvals?: ApprovalCalls;
  /**
   * Requests each credential (the bearer token; the signed-in web page apart) holds at once, event
   * streams aside; past it 429 `overloaded` before the body is read (ADR 0270). Default 64.
   */
  readonly maxInFlight?: number;
  /**
   * Event streams each credential holds open at once, apart from its requests: a `GET` that asks for
   * `text/event-stream`, a 2026-07-28 `subscriptions/listen`. Default 64.
   */
  readonly maxStreams?: number;
}

export interface RunningConsole {
  /** `http://127.0.0.1:4270/mcp`: what an MCP client connects to. */
  readonly url: string;
  readonly port: number;
  /** The web page's one-time sign-in URL: `http://127.0.0.1:4270/#login=<code>`. */
  readonly signInUrl: string;
  close(): Promise<void>;
}

/**
 * How long a kept-alive connection may sit idle (Node's default is 5 s). Node's idle timer is checked
 * before the socket is read, so when the console's event loop is held longer than that (budgeting a
 * large answer holds it for seconds on a loaded machine; so does a test sharing the process with
 * it), a request a client sent meanwhile on a pooled connection finds the socket destroyed under it:
 * ECONNRESET, and a POST is not retried. A minute covers any hold the console's own work makes; an
 * idle connection held that long costs a loopback socket. Clients follow the `Keep-Alive: timeout`
 * hint the server sends, so they drop their side first.
 */
const consoleKeepAliveMs = 60_000;

export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  const { listen } = options;
  // Checked again here so that no caller, however it built the address, can bind beyond loopback.
  if (!isLoopbackHost(listen.host)) {
    throw new CliError("not_loopback", `The console refuses to listen on ${listen.host}: loopback only`, {
      exitCode: 2,
    });
  }
  const app = createConsoleApp(options);
  const server = await new Promise<ServerType>((resolve, reject) => {
    const started = serve({ fetch: app.fetch, hostname: listen.host, port: listen.port });
    if ("keepAliveTimeout" in started) started.keepAliveTimeout = consoleKeepAliveMs;
    started.once("listening", () => resolve(started));
    started.once("error", (error: NodeJS.ErrnoException) => {
      const message =
        error.code === "EADDRINUSE"
          ? `The console cannot listen on ${listen.host}:${listen.port}: the port is in use (is another tackle serve running? set MESH_CONSOLE_LISTEN to another loopback port)`
          : `The console cannot listen on ${listen.host}:${listen.port}: ${error.message}`;
      reject(new CliError("console_unavailable", message, { cause: error }));
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : listen.port;
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  return {
    url: `http://${host}:${port}${consolePath}`,
    signInUrl: `http://${host}:${port}/#login=${app.sessions.loginCode}`,
    port,
    async close() {
      await app.close();
      await new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
    },
  };
}
