/**
 * The document server over HTTP (Hono): create (administrative), snapshot, updates since a version,
 * push, plan state, change log. Bearer auth per document; 404 alike for a document that does not exist
 * and for one the token does not open.
 */
import { timingSafeEqual } from "node:crypto";
import { type Logger, silentLogger } from "@tackle/core";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { defaultChangesLimit, maxChangesLimit } from "./change-log.ts";
import { DocumentHost, hashToken } from "./document-host.ts";
import type { DocumentStore, NumberRange } from "./document-store.ts";
import { type RowLookup, rowLookupLimits } from "./row-reads.ts";

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
  readonly logger?: Logger;
}

export interface DocumentServer {
  readonly app: Hono;
  readonly host: DocumentHost;
  readonly fetch: (request: Request) => Response | Promise<Response>;
  /** Waits for queued work, then closes the store. */
  close(): Promise<void>;
}

/** The response header carrying a document's version. */
export const VERSION_HEADER = "docscript-version";
/** The request header naming the end user a push is made for. */
export const USER_HEADER = "docscript-user";

const documentIdPattern = /^[A-Za-z0-9._:-]{1,200}$/;

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
  const hostTokenHashes = (options.hostTokens ?? []).map((token) => Buffer.from(hashToken(token), "hex"));
  const isHost = (token: string | undefined): boolean => {
    if (token === undefined || token === "") return false;
    const given = Buffer.from(hashToken(token), "hex");
    return hostTokenHashes.some((expected) => timingSafeEqual(given, expected));
  };
  const app = new Hono();
  const problem = (code: string, message: string) => ({ error: { code, message } });
  const bearer = (header: string | undefined): string | undefined => {
    const match = /^Bearer\s+(.+)$/i.exec(header ?? "");
    return match?.[1]?.trim();
  };

  app.onError((error, context) => {
    if (DocScriptError.isInstance(error)) {
      const status = error.code === "document_not_found" ? 404 : 400;
      return context.json({ error: error.toJSON() }, status);
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
  app.post("/documents", tooLarge(options.maxCreateBytes ?? 128 * 1024 * 1024));
  app.post("/documents/:documentId/push", tooLarge(maxPushBytes));

  app.post("/documents", async (context) => {
    if (options.adminToken === undefined)
      return context.json(problem("forbidden", "creating documents over HTTP is off"), 403);
    const token = bearer(context.req.header("authorization"));
    if (token === undefined)
      return context.json(problem("unauthorized", "an admin bearer token is required"), 401);
    const expected = Buffer.from(hashToken(options.adminToken), "hex");
    if (!timingSafeEqual(Buffer.from(hashToken(token), "hex"), expected))
      return context.json(problem("forbidden", "wrong admin token"), 403);
    const body = (await context.req.json().catch(() => undefined)) as
      | { documentId?: unknown; token?: unknown; snapshot?: unknown }
      | undefined;
    if (typeof body?.documentId !== "string" || !documentIdPattern.test(body.documentId)) {
      return context.json(problem("invalid_input", "documentId must match [A-Za-z0-9._:-]{1,200}"), 400);
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

  /** Answers 404 / 401 / 403, or undefined when the caller may use the document. */
  const guard = async (documentId: string, authorization: string | undefined) => {
    // No token, no answer about whether the document exists.
    if (bearer(authorization) === undefined)
      return { status: 401 as const, body: problem("unauthorized", "a bearer token is required") };
    const verdict = await host.authorize(documentId, bearer(authorization));
    if (verdict === "forbidden" && isHost(bearer(authorization))) return undefined;
    if (verdict === "missing")
      return { status: 401 as const, body: problem("unauthorized", "a bearer token is required") };
    // Another document's token (or a guessed one) learns nothing: a document it does not open answers
    // exactly as one that does not exist, so ids cannot be probed.
    if (verdict === "not_found" || verdict === "forbidden")
      return {
        status: 404 as const,
        body: problem("document_not_found", `no document ${documentId} opens with this token`),
      };
    return undefined;
  };

  app.get("/documents/:documentId/snapshot", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const { bytes, version } = await host.snapshot(documentId);
    return context.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      "content-type": "application/octet-stream",
      [VERSION_HEADER]: version,
    });
  });

  app.get("/documents/:documentId/updates", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const since = context.req.query("since");
    if (since === undefined)
      return context.json(problem("invalid_input", "the query parameter since is required"), 400);
    // waitMs: answer as soon as there is something new, or after that long (at most 25 s).
    const waitMs = Math.min(Math.max(Number(context.req.query("waitMs") ?? 0) || 0, 0), 25_000);
    // A client that leaves (its request's signal aborts) frees its wait at once.
    const { bytes, version } = await host.updatesSince(documentId, since, waitMs, {
      signal: context.req.raw.signal,
    });
    return context.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      "content-type": "application/octet-stream",
      [VERSION_HEADER]: version,
    });
  });

  app.post("/documents/:documentId/push", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const declared = Number(context.req.header("content-length") ?? "0");
    if (declared > maxPushBytes)
      return context.json(problem("too_large", `a push may carry at most ${maxPushBytes} bytes`), 413);
    const bytes = new Uint8Array(await context.req.arrayBuffer());
    if (bytes.byteLength > maxPushBytes)
      return context.json(problem("too_large", `a push may carry at most ${maxPushBytes} bytes`), 413);
    const user = context.req.header(USER_HEADER);
    const result = await host.push(documentId, bytes, {
      ...(user === undefined ? {} : { actor: user }),
      host: isHost(bearer(context.req.header("authorization"))),
      applyRemaining: context.req.query("apply_remaining") === "true",
    });
    if (result.status !== "rejected") {
      logger.info("docscript: push stored", { documentId, status: result.status, bytes: bytes.byteLength });
    }
    return context.json(result, result.status === "rejected" ? 422 : 200);
  });

  // The change log, newest first: `limit` entries (default 50, at most 200), `cursor` from the last page.
  app.get("/documents/:documentId/changes", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    if (options.store.changes === undefined)
      return context.json(problem("not_supported", "this document store keeps no change log"), 501);
    const cursor = context.req.query("cursor");
    if (cursor !== undefined && !/^[1-9]\d{0,15}$/.test(cursor))
      return context.json(problem("invalid_input", "cursor is the nextCursor of a previous page"), 400);
    const limitText = context.req.query("limit");
    const limit = limitText === undefined ? defaultChangesLimit : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1)
      return context.json(problem("invalid_input", "limit is a whole number from 1"), 400);
    const page = await options.store.changes(documentId, {
      ...(cursor === undefined ? {} : { before: Number(cursor) }),
      limit: Math.min(limit, maxChangesLimit),
    });
    return context.json(page, 200);
  });

  // Pages read from the store's rows (never the whole Loro document): ?kind=…&id=… (repeatable),
  // after (a cursor: the last id of the previous page), limit (0–1000; default 100).
  const pageQuery = (context: {
    req: { query(name: string): string | undefined; queries(name: string): string[] | undefined };
  }) => {
    const kinds = context.req.queries("kind");
    const ids = context.req.queries("id");
    const after = context.req.query("after");
    const asked = Math.floor(Number(context.req.query("limit") ?? 100));
    // 0 answers only the version, totals and issues.
    const limit = Math.min(Math.max(Number.isNaN(asked) ? 100 : asked, 0), 1000);
    return {
      ...(kinds === undefined ? {} : { kinds }),
      ...(ids === undefined ? {} : { ids }),
      ...(after === undefined ? {} : { after }),
      limit,
    };
  };

  app.get("/documents/:documentId/entities", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const page = await host.entityPage(documentId, pageQuery(context));
    return context.json(page, 200, { [VERSION_HEADER]: page.version });
  });

  app.get("/documents/:documentId/relations", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const endpoint = context.req.query("endpoint");
    const page = await host.relationPage(documentId, {
      ...pageQuery(context),
      ...(endpoint === undefined ? {} : { endpoint }),
    });
    return context.json(page, 200, { [VERSION_HEADER]: page.version });
  });

  // Stored rows by id or by the members a query finds (ADR 0466): `{ lookups: [...] }`, each
  // `{ rows: "entities" | "relations", ids }` or `{ members: "entity" | "relation", kinds?, ids?,
  // endpoint?, endpoints?, variantOf?, variantsOf?, identity?, identities?, range?, after?, limit }`,
  // `range` a window `{ field, from?, to? }` on an entity's number field.
  app.post("/documents/:documentId/rows", tooLarge(8 * 1024 * 1024));
  app.post("/documents/:documentId/rows", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    const body = (await context.req.json().catch(() => undefined)) as { lookups?: unknown } | undefined;
    const lookups = rowLookupsOf(body?.lookups);
    if (typeof lookups === "string") return context.json(problem("invalid_input", lookups), 400);
    const answer = await host.rowLookup(documentId, lookups);
    return context.json(answer, 200, { [VERSION_HEADER]: answer.version });
  });

  app.get("/documents/:documentId/plans/:planId", async (context) => {
    const documentId = context.req.param("documentId");
    const denied = await guard(documentId, context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    return context.json(await host.planState(documentId, context.req.param("planId")), 200);
  });

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

const isText = (value: unknown): value is string => typeof value === "string";
const isTexts = (value: unknown, most: number): value is string[] =>
  Array.isArray(value) && value.length <= most && value.every(isText);

/** A lookup's window on a number field, or what is wrong with it. */
function rangeOf(value: unknown): NumberRange | undefined | string {
  if (value === undefined) return undefined;
  const range = value as Record<string, unknown>;
  if (typeof value !== "object" || value === null || !isText(range.field))
    return "range is { field, from?, to? } with field a string";
  for (const bound of ["from", "to"] as const)
    if (range[bound] !== undefined && !(typeof range[bound] === "number" && Number.isFinite(range[bound])))
      return `range.${bound} is a finite number`;
  return {
    field: range.field,
    ...(range.from === undefined ? {} : { from: range.from as number }),
    ...(range.to === undefined ? {} : { to: range.to as number }),
  };
}

/** The lookups of a `rows` request, or what is wrong with them. */
function rowLookupsOf(value: unknown): RowLookup[] | string {
  const { lookups: mostLookups, ids: mostIds, members: mostMembers } = rowLookupLimits;
  if (!Array.isArray(value) || value.length > mostLookups)
    return `lookups is a list of at most ${mostLookups} lookups`;
  const lookups: RowLookup[] = [];
  for (const raw of value as Record<string, unknown>[]) {
    if (typeof raw !== "object" || raw === null) return "each lookup is an object";
    if (raw.rows === "entities" || raw.rows === "relations") {
      if (!isTexts(raw.ids, mostIds)) return `a rows lookup names at most ${mostIds} ids`;
      lookups.push({ rows: raw.rows, ids: raw.ids });
      continue;
    }
    if (raw.members !== "entity" && raw.members !== "relation")
      return 'each lookup names rows ("entities" or "relations") or members ("entity" or "relation")';
    const limit = raw.limit;
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > mostMembers)
      return `a members lookup's limit is a whole number from 1 to ${mostMembers}`;
    for (const name of ["kinds", "ids", "endpoints", "variantsOf", "identities"] as const)
      if (raw[name] !== undefined && !isTexts(raw[name], mostIds))
        return `${name} is a list of at most ${mostIds} strings`;
    for (const name of ["endpoint", "variantOf", "identity", "after"] as const)
      if (raw[name] !== undefined && !isText(raw[name])) return `${name} is a string`;
    const range = rangeOf(raw.range);
    if (typeof range === "string") return range;
    if (range !== undefined && raw.members !== "entity") return "a range reads entities";
    lookups.push({
      members: raw.members,
      limit,
      ...(raw.kinds === undefined ? {} : { kinds: raw.kinds as string[] }),
      ...(raw.ids === undefined ? {} : { ids: raw.ids as string[] }),
      ...(raw.endpoints === undefined ? {} : { endpoints: raw.endpoints as string[] }),
      ...(raw.variantsOf === undefined ? {} : { variantsOf: raw.variantsOf as string[] }),
      ...(raw.identities === undefined ? {} : { identities: raw.identities as string[] }),
      ...(raw.endpoint === undefined ? {} : { endpoint: raw.endpoint as string }),
      ...(raw.variantOf === undefined ? {} : { variantOf: raw.variantOf as string }),
      ...(raw.identity === undefined ? {} : { identity: raw.identity as string }),
      ...(raw.after === undefined ? {} : { after: raw.after as string }),
      ...(range === undefined ? {} : { range }),
    });
  }
  return lookups;
}
