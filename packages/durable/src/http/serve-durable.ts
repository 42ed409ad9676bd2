/** Serves a runner over HTTP on a loopback address only: runs carry approvals and must not face a network. */
import { type ServerType, serve } from "@hono/node-server";
import { isLoopbackHost } from "@tackle/core/internal";
import { DurableError } from "../errors/durable-error.ts";
import { createDurableApp, type DurableAppOptions } from "./create-durable-app.ts";

export interface ServeDurableOptions extends DurableAppOptions {
  /** Default 127.0.0.1; anything but a loopback address is refused. */
  readonly hostname?: string;
  /** Default 0: a free port. */
  readonly port?: number;
}

export interface DurableServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function serveDurable(options: ServeDurableOptions): Promise<DurableServer> {
  const hostname = options.hostname ?? "127.0.0.1";
  if (!isLoopbackHost(hostname)) {
    throw new DurableError(
      "invalid_request",
      `Refusing to listen on ${hostname}: the durable HTTP server binds loopback only`,
    );
  }
  const app = createDurableApp(options);
  const server = await new Promise<ServerType>((resolve, reject) => {
    const started = serve(
      {
        fetch: app.fetch,
        hostname,
        port: options.port ?? 0,
        // Advertises `Keep-Alive: timeout=5` (fetch drops an idle connection at 3 s, by timers that fall
        // behind on a busy event loop) and holds one 30 s, so a late reuse is not closed under.
        serverOptions: { keepAliveTimeout: 5_000, keepAliveTimeoutBuffer: 25_000 },
      },
      () => resolve(started),
    );
    started.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new DurableError(
          "listen_failed",
          `Cannot listen on ${hostname}:${options.port ?? 0}: ${error.code ?? error.message}`,
          {
            cause: error,
          },
        ),
      ),
    );
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : options.port;
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
