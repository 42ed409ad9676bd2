/**
 * The document server over HTTP (Hono): create (administrative), snapshot, updates since a version,
 * push, plan state, change log. Bearer auth per document; 404 alike for a document that does not exist
 * and for one the token does not open.
 */
import { type Logger, silentLogger } from "@tackle/core";
import { isTransientDatabaseError } from "@tackle/storage";
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { bodyBytes, defaultMaxBodyBytes } from "./body-bytes.ts";
import { DocumentHost } from "./document-host.ts";
import { logRoutes, rowRoutes } from "./document-routes.ts";
import type { DocumentStore } from "./document-store.ts";
import {
  defaultMaxInFlight,
  defaultMaxWaitingPulls,
  type RequestPlaces,
  requestPlaces,
} from "./request-places.ts";
import { bearer, guardDocuments, problem, routeAccess, sameToken } from "./route-access.ts";

export { USER_HEADER, VERSION_HEADER } from "./document-routes.ts";

export interface DocumentServerOptions {
  readonly store: DocumentStore;
  readonly schema: Schema;
  /** Bearer token for `POST /documents`. Without it, creating over HTTP is off. */
  readonly adminToken?: string;
  readonly compactEvery?: number;
  /** Compact once the log after the snapshot holds this many bytes (default 1 MiB) ... */
  readonly compactLogBytes?: number;
  /** ... or its oldest update is this old, checked on each push (default 10 min). */
  readonly compactAgeMs?: number;
  readonly maxOpenDocuments?: number;
  /** Largest push body accepted. Default 16 MiB. */
  readonly maxPushBytes?: number;
  /** Largest `POST /documents` body (JSON with a base64 snapshot), in bytes. Default 128 MiB. */
  readonly maxCreateBytes?: number;
  /**
   * Host credentials: a bearer that is one of these opens every document and may set host-only fields
   * (a stored file's `storageKey`, `digest`). A push by any other credential that sets one is `rejected`.
   */
  readonly hostTokens?: readonly string[];
  /**
   * Requests one credential may have in flight at once on a document (default 64; the admin's creates
   * count as one caller), waiting pulls apart: past it 429 `too_many_requests` with `Retry-After: 1`,
   * before the body is read. A place is freed when its request is answered, fails, or its client goes.
   */
  readonly maxInFlight?: number;
  /**
   * Pulls one credential may have waiting at once on a document (`waitMs` > 0; default 256), counted
   * apart from `maxInFlight` so a pull waiting for the next push neither starves nor is starved by
   * pushes and reads; past it 429 `too_many_requests` with `Retry-After: 1`.
   */
  readonly maxWaitingPulls?: number;
  /**
   * Bytes one credential's answers on a document may hold unsent at once (default 64 MiB; ADR 0552):
   * a place is held until its answer has been sent, and a caller whose answers not yet read hold this
   * many is refused 429 `too_many_requests` before anything more is made for it. Served by
   * `serveDocuments` (which watches the connections); through `fetch` alone an answer is not watched.
   */
  readonly maxUnsentBytes?: number;
  /**
   * Bytes of one credential's request bodies held at once on a document (default 64 MiB; ADR 0552),
   * counted by their declared length (a chunked body as `maxPushBytes`) before a byte is read: past it
   * 429 `too_many_requests`, unless the body is the caller's only one.
   */
  readonly maxBodyBytes?: number;
  /** An answer its reader takes none of for this long is dropped with its connection (default 60 s). */
  readonly answerStallMs?: number;
  readonly logger?: Logger;
}

export interface DocumentServer {
  readonly app: Hono;
  readonly host: DocumentHost;
  readonly fetch: (request: Request) => Response | Promise<Response>;
  /** Waits for queued work, then closes the store. */
  close(): Promise<void>;
}

/** `Retry-After` of a 503 `unavailable`: the store failed for the moment (ADR 0492). */
const unavailableRetryAfterSeconds = 1;

/**
 * A document id, one segment of every route's path: "." and ".." match the characters but a URL
 * resolves them away (`/documents/../snapshot` is `/snapshot`), so no client could reach that document.
 */
const documentIdPattern = /^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,200}$/;

export function createDocumentServer(options: DocumentServerOptions): DocumentServer {
  const logger = options.logger ?? silentLogger;
  const host = new DocumentHost({
    store: options.store,
    schema: options.schema,
    ...(options.compactEvery === undefined ? {} : { compactEvery: options.compactEvery }),
    ...(options.compactLogBytes === undefined ? {} : { compactLogBytes: options.compactLogBytes }),
    ...(options.compactAgeMs === undefined ? {} : { compactAgeMs: options.compactAgeMs }),
    ...(options.maxOpenDocuments === undefined ? {} : { maxOpenDocuments: options.maxOpenDocuments }),
    logger,
  });
  const maxPushBytes = options.maxPushBytes ?? 16 * 1024 * 1024;
  const access = routeAccess(host, options.hostTokens ?? []);
  const app = new Hono();

  app.onError((error, context) => {
    if (DocScriptError.isInstance(error)) {
      const status = error.code === "not_found" ? 404 : 400;
      return context.json({ error: error.toJSON() }, status);
    }
    // The database's moment, not the server's failure (ADR 0492): the request's transaction rolled back
    // (or, its COMMIT's answer lost, may have committed: a push sent again answers `duplicate`).
    if (isTransientDatabaseError(error)) {
      logger.warn("docscript server: the store failed for the moment", {
        path: context.req.path,
        error: (error as Error).message,
      });
      return context.json(
        problem("unavailable", "the document store could not be reached for the moment; retry", {
          retryable: true,
          retryAfterSeconds: unavailableRetryAfterSeconds,
        }),
        503,
        { "retry-after": String(unavailableRetryAfterSeconds) },
      );
    }
    logger.error("docscript server: request failed", {
      path: context.req.path,
      error: (error as Error).message,
    });
    return context.json(problem("internal", "the server failed; see its log"), 500);
  });

  // Limits hold while the body streams in, chunked or not: nothing larger is ever buffered.
  const tooLarge = (limit: number) =>
    bodyLimit({
      maxSize: limit,
      onError: (context) =>
        context.json(problem("too_large", `a request may carry at most ${limit} bytes`), 413),
    });
  const places = requestPlaces({
    maxInFlight: options.maxInFlight ?? defaultMaxInFlight,
    maxWaitingPulls: options.maxWaitingPulls ?? defaultMaxWaitingPulls,
    ...(options.maxUnsentBytes === undefined ? {} : { maxUnsentBytes: options.maxUnsentBytes }),
    ...(options.answerStallMs === undefined ? {} : { answerStallMs: options.answerStallMs }),
  });
  createRoute(app, host, options.adminToken, places, tooLarge(options.maxCreateBytes ?? 128 * 1024 * 1024));
  // The credential, then a place of the caller's, then the body limits (which read a chunked body whole):
  // no body is read for a caller without a place or without a credential.
  guardDocuments(app, access);
  app.use("/documents/:documentId/*", places.documents);
  app.use(
    "/documents/:documentId/*",
    bodyBytes({ maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes, unknownLength: maxPushBytes }),
  );
  app.post("/documents/:documentId/push", tooLarge(maxPushBytes));
  app.post("/documents/:documentId/stage", tooLarge(maxPushBytes));
  app.post("/documents/:documentId/rows", tooLarge(8 * 1024 * 1024));
  const routes = { app, host, store: options.store, access, maxPushBytes, logger };
  logRoutes(routes);
  rowRoutes(routes);

  return {
    app,
    host,
    fetch: (request) => app.fetch(request),
    async close() {
      await host.close();
      await options.store.close();
    },
  };
}

/**
 * `POST /documents`: create a document with its token (and a snapshot to start from), admin only: the
 * admin token, then a place, then the body limit, before the body is read.
 */
function createRoute(
  app: Hono,
  host: DocumentHost,
  adminToken: string | undefined,
  places: RequestPlaces,
  tooLarge: MiddlewareHandler,
): void {
  const adminOnly: MiddlewareHandler = async (context, next) => {
    if (adminToken === undefined)
      return context.json(problem("forbidden", "creating documents over HTTP is off"), 403);
    const token = bearer(context.req.header("authorization"));
    if (token === undefined)
      return context.json(problem("unauthorized", "an admin bearer token is required"), 401);
    if (!sameToken(token, adminToken)) return context.json(problem("forbidden", "wrong admin token"), 403);
    await next();
  };
  app.post("/documents", adminOnly, places.creates, tooLarge, async (context) => {
    const body = (await context.req.json().catch(() => undefined)) as
      | { documentId?: unknown; token?: unknown; snapshot?: unknown }
      | undefined;
    if (typeof body?.documentId !== "string" || !documentIdPattern.test(body.documentId)) {
      return context.json(
        problem("invalid_input", 'documentId must match [A-Za-z0-9._:-]{1,200} and be neither "." nor ".."'),
        400,
      );
    }
    if (typeof body.token !== "string" || body.token.length < 16) {
      return context.json(problem("invalid_input", "token must be a string of at least 16 characters"), 400);
    }
    const snapshot =
      typeof body.snapshot === "string" ? new Uint8Array(Buffer.from(body.snapshot, "base64")) : undefined;
    const created = await host.create(body.documentId, body.token, snapshot);
    if (!created) return context.json(problem("document_exists", `document ${body.documentId} exists`), 409);
    return context.json({ documentId: body.documentId }, 201);
  });
}
