/**
 * The routes of one document (the server puts them all behind one guard, `guardDocuments`): snapshot, updates since a version, push, staged parts,
 * change log, pages of rows, row lookups and plan state. Creating documents is the admin route's job.
 */
import type { Logger } from "@tackle/core";
import type { Hono } from "hono";
import { defaultChangesLimit, maxChangesLimit } from "./change-log.ts";
import type { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { pageQuery, rowLookupsOf, waitMsOf } from "./request-input.ts";
import { bearer, problem, type RouteAccess } from "./route-access.ts";

/** The response header carrying a document's version. */
export const VERSION_HEADER = "docscript-version";
/** The request header naming the end user a push is made for. */
export const USER_HEADER = "docscript-user";

export interface DocumentRoutesContext {
  readonly app: Hono;
  readonly host: DocumentHost;
  readonly store: DocumentStore;
  readonly access: RouteAccess;
  readonly maxPushBytes: number;
  readonly logger: Logger;
}

/** The log: the snapshot, updates since a version (waiting for them if asked), pushes, the change log. */
export function logRoutes({ app, host, store, access, maxPushBytes, logger }: DocumentRoutesContext): void {
  app.get("/documents/:documentId/snapshot", async (context) => {
    const documentId = context.req.param("documentId");
    const { bytes, version } = await host.snapshot(documentId);
    return context.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      "content-type": "application/octet-stream",
      [VERSION_HEADER]: version,
    });
  });

  app.get("/documents/:documentId/updates", async (context) => {
    const documentId = context.req.param("documentId");
    const since = context.req.query("since");
    if (since === undefined)
      return context.json(problem("invalid_input", "the query parameter since is required"), 400);
    // waitMs: answer as soon as there is something new, or after that long (at most 25 s).
    const waitMs = waitMsOf(context.req.query("waitMs"));
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
    const declared = Number(context.req.header("content-length") ?? "0");
    if (declared > maxPushBytes)
      return context.json(problem("too_large", `a push may carry at most ${maxPushBytes} bytes`), 413);
    const bytes = new Uint8Array(await context.req.arrayBuffer());
    if (bytes.byteLength > maxPushBytes)
      return context.json(problem("too_large", `a push may carry at most ${maxPushBytes} bytes`), 413);
    const user = context.req.header(USER_HEADER);
    const result = await host.push(documentId, bytes, {
      ...(user === undefined ? {} : { actor: user }),
      host: access.isHost(bearer(context.req.header("authorization"))),
      applyRemaining: context.req.query("apply_remaining") === "true",
    });
    if (result.status !== "rejected") {
      logger.info("docscript: push stored", { documentId, status: result.status, bytes: bytes.byteLength });
    }
    return context.json(result, result.status === "rejected" ? 422 : 200);
  });

  // A part of a run's update ahead of its push (ADR 0508): `{ staged, reason? }`, never an error.
  app.post("/documents/:documentId/stage", async (context) => {
    const documentId = context.req.param("documentId");
    const bytes = new Uint8Array(await context.req.arrayBuffer());
    if (bytes.byteLength > maxPushBytes)
      return context.json(problem("too_large", `a part may carry at most ${maxPushBytes} bytes`), 413);
    const { staged, reason } = await host.stage(documentId, bytes, maxPushBytes);
    return context.json(reason === undefined ? { staged } : { staged, reason }, 200);
  });

  // The change log, newest first: `limit` entries (default 50, at most 200), `cursor` from the last page.
  app.get("/documents/:documentId/changes", async (context) => {
    const documentId = context.req.param("documentId");
    if (store.changes === undefined)
      return context.json(problem("not_supported", "this document store keeps no change log"), 501);
    const cursor = context.req.query("cursor");
    if (cursor !== undefined && !/^[1-9]\d{0,15}$/.test(cursor))
      return context.json(problem("invalid_input", "cursor is the nextCursor of a previous page"), 400);
    const limitText = context.req.query("limit");
    const limit = limitText === undefined ? defaultChangesLimit : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1)
      return context.json(problem("invalid_input", "limit is a whole number from 1"), 400);
    const page = await store.changes(documentId, {
      ...(cursor === undefined ? {} : { before: Number(cursor) }),
      limit: Math.min(limit, maxChangesLimit),
    });
    return context.json(page, 200);
  });
}

/** Reads of the stored rows (never the whole Loro document): pages, lookups, and a plan's state. */
export function rowRoutes({ app, host }: DocumentRoutesContext): void {
  app.get("/documents/:documentId/entities", async (context) => {
    const documentId = context.req.param("documentId");
    const page = await host.entityPage(documentId, pageQuery(context));
    return context.json(page, 200, { [VERSION_HEADER]: page.version });
  });

  app.get("/documents/:documentId/relations", async (context) => {
    const documentId = context.req.param("documentId");
    const endpoint = context.req.query("endpoint");
    const page = await host.relationPage(documentId, {
      ...pageQuery(context),
      ...(endpoint === undefined ? {} : { endpoint }),
    });
    return context.json(page, 200, { [VERSION_HEADER]: page.version });
  });

  // Stored rows by id or by the members a query finds (ADR 0466): `{ lookups: [...] }`, each
  // `{ rows: "entities" | "relations", ids }` or `{ members: "entity" | "relation", kinds?, ids?,
  // endpoint?, endpoints?, variantOf?, variantsOf?, identity?, identities?, range?, ordered?, after?,
  // limit, bare?, claims? }`, `range` a window `{ field, from?, to? }` on an entity's number field,
  // `ordered` a holder's relations of a kind in order `{ holder, kind, from: "first" | "last" }`,
  // `bare: true` naming the members' rows without their JSON, `claims: true` (entities) adding every
  // row claiming the entities found and their variants (`claimed`). With `issues: true`, the answer carries the
  // document's issues too.
  app.post("/documents/:documentId/rows", async (context) => {
    const documentId = context.req.param("documentId");
    const body = (await context.req.json().catch(() => undefined)) as
      | { lookups?: unknown; issues?: unknown }
      | undefined;
    const lookups = rowLookupsOf(body?.lookups);
    if (typeof lookups === "string") return context.json(problem("invalid_input", lookups), 400);
    if (body?.issues !== undefined && typeof body.issues !== "boolean")
      return context.json(problem("invalid_input", "issues is a boolean"), 400);
    const answer = await host.rowLookup(documentId, lookups, { issues: body?.issues === true });
    return context.json(answer, 200, { [VERSION_HEADER]: answer.version });
  });

  app.get("/documents/:documentId/plans/:planId", async (context) => {
    const documentId = context.req.param("documentId");
    return context.json(await host.planState(documentId, context.req.param("planId")), 200);
  });
}
