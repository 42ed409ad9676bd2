/** Serving a tool set over MCP: stdio (or any message transport) and Streamable HTTP on loopback. */
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { toNodeHandler } from "@modelcontextprotocol/node";
import {
  createMcpHandler,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  type McpHttpHandler,
  originValidationResponse,
  type Transport,
} from "@modelcontextprotocol/server";
import { type StdioServerHandle, serveStdio } from "@modelcontextprotocol/server/stdio";
import { ToolError } from "../errors/tool-error.ts";
import { isLoopbackHost } from "../http/loopback.ts";
import type { ToolSet } from "../tool-set/create-tool-set.ts";
import {
  assertPagingToolFree,
  assertServableOverMcp,
  createMcpServer,
  type McpServerOptions,
} from "./create-mcp-server.ts";
import { createInFlightBound, refuseOverloaded } from "./in-flight.ts";
import { createResultPages } from "./result-pages/create-result-pages.ts";

export interface McpStdioOptions extends McpServerOptions {
  /** Serve this transport instead of the process's stdin/stdout (a socket, an in-memory pair). */
  readonly transport?: Transport;
  /** Out-of-band errors (a broken pipe, an unparsable line); by default written to stderr. */
  readonly onError?: (error: Error) => void;
}

/**
 * Serves the tool set over stdio. The SDK's serving entry picks the protocol era from the client's
 * opening message — a 2025 `initialize` or a 2026-07-28 `server/discover` — and pins a fresh server
 * for the connection, so both revisions are served from one definition.
 */
export function serveMcpStdio(toolset: ToolSet, options: McpStdioOptions = {}): StdioServerHandle {
  assertServableOverMcp(toolset);
  // One connection: its cursors read on whichever server the SDK pins for a request.
  const shared = sharedPages(toolset, options, randomUUID());
  return serveStdio(() => createMcpServer(toolset, shared), {
    ...(options.transport === undefined ? {} : { transport: options.transport }),
    onerror: options.onError ?? reportToStderr,
  });
}

export interface McpHttpHandlerOptions extends McpServerOptions {
  /** Out-of-band errors and rejected requests; by default written to stderr. */
  readonly onError?: (error: Error) => void;
}

/**
 * A web-standard (`fetch`) handler serving the tool set over Streamable HTTP, stateless: every request
 * gets a fresh server, 2026-07-28 requests natively and 2025 ones through the SDK's stateless
 * fallback. It does no Host/Origin checking of its own; `serveMcpHttp` adds that.
 */
export function createMcpHttpHandler(toolset: ToolSet, options: McpHttpHandlerOptions = {}): McpHttpHandler {
  assertServableOverMcp(toolset);
  // Every request gets a fresh server and carries no identity (the endpoint has no credentials: any
  // client that reaches it may call every tool), so the endpoint's requests share one owner.
  const shared = sharedPages(toolset, options, randomUUID());
  return createMcpHandler(() => createMcpServer(toolset, shared), {
    onerror: options.onError ?? reportToStderr,
  });
}

export interface McpHttpServeOptions extends McpHttpHandlerOptions {
  /** A loopback address; anything else is refused. Default `127.0.0.1`. */
  readonly host?: string;
  /** Default 0: a free port. */
  readonly port?: number;
  /** The endpoint path. Default `/mcp`. */
  readonly path?: string;
  /**
   * Requests the endpoint serves at once — every POST (call, listing, handshake) and any other with a
   * body, not GET or HEAD — from arrival until the answer is written or the client is gone (ADR 0534).
   * Past it such a request is answered at once, before its body is read: HTTP 429 with `Retry-After: 1` and a JSON-RPC error (`id` null, `data.code`
   * `overloaded`, `retryable`), which the MCP SDK client throws as an `SdkHttpError` of status 429
   * carrying that text, and `toolSetFromMcp` as a retryable `overloaded` error. One bound for every
   * caller: the endpoint has no credentials or sessions to tell callers apart. A 2026-07-28
   * `subscriptions/listen` stream holds a place while open. Default 64: 64 bodies of up to 4 MiB.
   */
  readonly maxInFlight?: number;
}

export interface McpHttpServer {
  /** The endpoint, e.g. `http://127.0.0.1:41234/mcp`. */
  readonly url: URL;
  close(): Promise<void>;
}

/**
 * Serves the tool set over Streamable HTTP on loopback only, with the SDK's DNS-rebinding guards (Host
 * and Origin must be localhost-class), at most `maxInFlight` requests at once. Other paths answer 404.
 */
export async function serveMcpHttp(
  toolset: ToolSet,
  options: McpHttpServeOptions = {},
): Promise<McpHttpServer> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopbackHost(host)) {
    throw new ToolError(
      "not_loopback",
      `Refusing to serve MCP on ${host}: only loopback addresses are allowed`,
      {
        data: { host },
      },
    );
  }
  const path = options.path ?? "/mcp";
  const bound = createInFlightBound(options.maxInFlight);
  const handler = createMcpHttpHandler(toolset, options);
  const hostnames = localhostAllowedHostnames();
  const origins = localhostAllowedOrigins();
  const guarded = toNodeHandler({
    fetch: async (request: Request) =>
      hostHeaderValidationResponse(request, hostnames) ??
      originValidationResponse(request, origins) ??
      handler.fetch(request),
  });
  // Advertises `Keep-Alive: timeout=5` and holds an idle connection 25 s more: Node checks its idle
  // timer before it reads the socket, so after the event loop was held past 5 s (a large answer, a
  // busy machine) a client's next request on its pooled connection met a destroyed socket (ECONNRESET).
  const server = createServer(
    { keepAliveTimeout: 5_000, keepAliveTimeoutBuffer: 25_000 },
    (request, response) => {
      if (new URL(request.url ?? "/", "http://localhost").pathname !== path) {
        response.writeHead(404, { "content-type": "text/plain" }).end("Not found");
        return;
      }
      // Counted before the body is read: the SDK's Node adapter reads a body whole, whatever the method
      // (a PUT's before the endpoint answers it 405). GET and HEAD carry none and pass uncounted.
      const release = carriesBody(request.method) ? bound.take() : () => {};
      if (release === undefined) {
        refuseOverloaded(response, bound.max);
        return;
      }
      // The place is given back once the exchange is over: its answer written (the adapter's promise
      // settles after the last chunk of a streamed answer) or its client gone.
      response.once("close", release);
      // Node's IncomingMessage fits the SDK's structural type; only exactOptionalPropertyTypes objects.
      guarded(request as unknown as Parameters<typeof guarded>[0], response)
        .catch((error: unknown) => {
          (options.onError ?? reportToStderr)(error as Error);
          if (!response.headersSent) response.writeHead(500);
          response.end();
        })
        .finally(release);
    },
  );
  server.listen(options.port ?? 0, host);
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const url = new URL(`http://${host.includes(":") ? `[${host}]` : host}:${port}${path}`);
  return {
    url,
    async close() {
      await handler.close();
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}

/**
 * The options with one budget and one owner for every server the SDK creates for an endpoint, checked
 * now: the SDK creates a server per request, where a refusal would come too late.
 */
function sharedPages<T extends McpServerOptions>(toolset: ToolSet, options: T, owner: string): T {
  const resultPages = options.resultPages ?? createResultPages();
  assertPagingToolFree(toolset, resultPages);
  return { ...options, resultPages, owner: options.owner ?? owner };
}

/** The methods whose body the SDK's Node adapter reads: all but GET and HEAD. */
const carriesBody = (method: string | undefined) => method !== "GET" && method !== "HEAD";

function reportToStderr(error: Error): void {
  process.stderr.write(`tackle mcp: ${error.message}\n`);
}
