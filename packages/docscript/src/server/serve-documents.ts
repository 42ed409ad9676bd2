/** Runs a document server on loopback with @hono/node-server. */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { isLoopbackHost } from "@tackle/core/internal";
import { DocScriptError } from "../schema/docscript-error.ts";
import {
  createDocumentServer,
  type DocumentServer,
  type DocumentServerOptions,
} from "./create-document-server.ts";

/** What the server advertises as its idle timeout (`Keep-Alive: timeout=5`). */
const keepAliveHintMs = 5_000;

export interface ServeDocumentsOptions extends DocumentServerOptions {
  /** Default 0: a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. Anything off loopback needs `exposed: true`: put TLS and a proxy in front first. */
  readonly hostname?: string;
  readonly exposed?: boolean;
}

export interface RunningDocumentServer extends DocumentServer {
  readonly url: string;
}

export async function serveDocuments(options: ServeDocumentsOptions): Promise<RunningDocumentServer> {
  const hostname = options.hostname ?? "127.0.0.1";
  if (!isLoopbackHost(hostname) && options.exposed !== true) {
    throw new DocScriptError(
      "refused_address",
      `the document server binds loopback only; ${hostname} needs exposed: true`,
    );
  }
  const server = createDocumentServer(options);
  const listening = serve({
    // The Node request and response go along (`env`): a request's place is held until its answer is sent.
    fetch: (request, env) => server.app.fetch(request, env),
    port: options.port ?? 0,
    hostname,
    serverOptions: {
      // Clients are told `Keep-Alive: timeout=5` and drop an idle connection before then (fetch 2 s
      // before, on timers that fall behind the clock on a busy event loop); the server holds it 25 s
      // more, so it does not close one a client is about to reuse. Headers still have 60 s.
      keepAliveTimeout: keepAliveHintMs,
      keepAliveTimeoutBuffer: 25_000,
      headersTimeout: 60_000,
    },
  });
  await new Promise<void>((resolve, reject) => {
    listening.once("listening", resolve);
    listening.once("error", reject);
  });
  const address = listening.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    ...server,
    url: `http://${shownHost}:${address.port}`,
    async close() {
      await new Promise<void>((resolve) => {
        listening.close(() => resolve());
        (listening as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await server.close();
    },
  };
}
