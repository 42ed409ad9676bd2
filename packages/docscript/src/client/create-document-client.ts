/**
 * The document server's client: pull a snapshot or the updates since a version, push an update, ask
 * whether a plan was applied, read the change log.
 */
import type { LoroDoc } from "loro-crdt";
import { encodeVersion } from "../document/version.ts";
import type { ChangePage } from "../server/change-log.ts";
import type { EntityPage, PlanState, RelationPage } from "../server/document-host.ts";
import type { PushResult } from "../server/push-result.ts";
import { DocumentClientError } from "./document-client-error.ts";

export interface DocumentClientOptions {
  /** The server's origin, or one per document (it must not change for a document). */
  readonly origin: string | ((documentId: string) => string);
  /** Bearer token, or one per document. */
  readonly token?: string | ((documentId: string) => string | Promise<string>);
  /** The end user, sent with every request and recorded with each stored update. */
  readonly userId?: string;
  readonly fetchImpl?: typeof fetch;
  /** Per request. Default 30 000 ms. */
  readonly timeoutMs?: number;
}

export interface PullResult {
  /** `snapshot`: the whole document; `updates`: only what a client at `since` lacks. */
  readonly kind: "snapshot" | "updates";
  readonly bytes: Uint8Array;
  /** The version the bytes bring a client to; pass it as `since` next time. */
  readonly version: string;
}

export interface DocumentClient {
  /**
   * With `since` and `waitMs`: when the client lacks nothing, the server holds the answer up to
   * `waitMs` (at most 25 000, below `timeoutMs`) and sends the next push, through any server, as soon as it is stored.
   */
  pull(documentId: string, options?: { since?: string; waitMs?: number }): Promise<PullResult>;
  /** Brings `doc` up to the server's version: a snapshot when it is empty, else the updates it lacks. */
  pullInto(documentId: string, doc: LoroDoc): Promise<{ version: string }>;
  /** Sends an update; `rejected` and `conflicted` are results, not errors. */
  push(documentId: string, update: Uint8Array, options?: { applyRemaining?: boolean }): Promise<PushResult>;
  /**
   * A page of entities in id order, read from the server's stored rows (costs the same at any document
   * size): by kinds and/or ids, after the last id of the previous page; with the version, the
   * document's issues and totals.
   */
  entities(documentId: string, query?: PageQuery): Promise<EntityPage>;
  /** A page of relations in id order, from the stored rows: by kinds, ids, or an endpoint entity. */
  relations(documentId: string, query?: PageQuery & { endpoint?: string }): Promise<RelationPage>;
  /** Whether the server applied a plan id to the document (`applied`, with the version it reached) or not. */
  planState(documentId: string, planId: string): Promise<PlanState>;
  /**
   * The document's change log, newest first: `limit` entries (the server's default 50, at most 200);
   * pass a page's `nextCursor` as `cursor` for the older ones.
   */
  changes(documentId: string, options?: { cursor?: string; limit?: number }): Promise<ChangePage>;
  /** Administrative: creates a document that `token` opens. False when it exists. */
  createDocument(
    documentId: string,
    options: { adminToken: string; token: string; snapshot?: Uint8Array },
  ): Promise<boolean>;
}

/** Which page of entities or relations to read. */
export interface PageQuery {
  readonly kinds?: readonly string[] | undefined;
  readonly ids?: readonly string[] | undefined;
  /** The last id of the previous page. */
  readonly after?: string | undefined;
  /** At most 1000; default 100. */
  readonly limit?: number | undefined;
}

const VERSION_HEADER = "docscript-version";
const USER_HEADER = "docscript-user";

export function createDocumentClient(options: DocumentClientOptions): DocumentClient {
  const fetchImpl = options.fetchImpl ?? fetch;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const originOf = (documentId: string): string => {
    const origin = typeof options.origin === "function" ? options.origin(documentId) : options.origin;
    return origin.replace(/\/+$/, "");
  };
  const tokenOf = async (documentId: string): Promise<string | undefined> =>
    typeof options.token === "function" ? await options.token(documentId) : options.token;
  const documentUrl = (documentId: string, suffix: string): string =>
    `${originOf(documentId)}/documents/${encodeURIComponent(documentId)}/${suffix}`;

  const request = async (url: string, init: RequestInit, token: string | undefined): Promise<Response> => {
    const headers = new Headers(init.headers);
    if (token !== undefined) headers.set("authorization", `Bearer ${token}`);
    if (options.userId !== undefined) headers.set(USER_HEADER, options.userId);
    // One deadline for the request and its retry.
    const signal = AbortSignal.timeout(timeoutMs);
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await fetchImpl(url, { ...init, headers, signal });
      } catch (error) {
        // A kept-alive connection the server closed as the request went out: the server never read it.
        // Every request here is safe to send again (reads; a push the server stores once, answering
        // `duplicate` when it has the bytes or the plan; a create answering 409), so once, at once.
        if (attempt === 1 && !signal.aborted && resetBeforeAnswer(error)) continue;
        throw new DocumentClientError(
          "network_error",
          `no answer from ${new URL(url).origin}: ${(error as Error).message}`,
          { retryable: true, cause: error },
        );
      }
    }
  };

  const failure = async (response: Response, documentId: string): Promise<DocumentClientError> => {
    const body = (await response.json().catch(() => undefined)) as
      | { error?: { code?: string; message?: string } }
      | undefined;
    const message = body?.error?.message ?? `HTTP ${response.status}`;
    const status = response.status;
    if (status === 401)
      return new DocumentClientError("unauthorized", `document ${documentId}: ${message}`, { status });
    if (status === 403)
      return new DocumentClientError("forbidden", `document ${documentId}: ${message}`, { status });
    if (status === 404)
      return new DocumentClientError("document_not_found", `document ${documentId}: ${message}`, { status });
    if (status >= 500)
      return new DocumentClientError("server_error", `document ${documentId}: ${message}`, {
        status,
        retryable: true,
      });
    return new DocumentClientError("invalid_request", `document ${documentId}: ${message}`, {
      status,
      data: { serverCode: body?.error?.code },
    });
  };

  const pullBytes = async (
    documentId: string,
    since: string | undefined,
    waitMs = 0,
  ): Promise<PullResult> => {
    const url =
      since === undefined
        ? documentUrl(documentId, "snapshot")
        : `${documentUrl(documentId, "updates")}?since=${encodeURIComponent(since)}${waitMs > 0 ? `&waitMs=${Math.round(waitMs)}` : ""}`;
    const response = await request(url, { method: "GET" }, await tokenOf(documentId));
    if (!response.ok) throw await failure(response, documentId);
    const version = response.headers.get(VERSION_HEADER);
    if (version === null)
      throw new DocumentClientError("invalid_response", `the server sent no ${VERSION_HEADER} header`, {
        status: response.status,
      });
    return {
      kind: since === undefined ? "snapshot" : "updates",
      bytes: new Uint8Array(await response.arrayBuffer()),
      version,
    };
  };

  const page = async <Page>(
    documentId: string,
    route: "entities" | "relations",
    query: PageQuery & { endpoint?: string | undefined },
  ): Promise<Page> => {
    const params = new URLSearchParams();
    for (const kind of query.kinds ?? []) params.append("kind", kind);
    for (const id of query.ids ?? []) params.append("id", id);
    if (query.ids !== undefined && query.ids.length === 0) params.append("id", "");
    if (query.after !== undefined) params.set("after", query.after);
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    if (query.endpoint !== undefined) params.set("endpoint", query.endpoint);
    const response = await request(
      `${documentUrl(documentId, route)}?${params}`,
      { method: "GET" },
      await tokenOf(documentId),
    );
    if (response.status !== 200) throw await failure(response, documentId);
    const body = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    if (body === undefined || typeof body.version !== "string" || !Array.isArray(body[route]))
      throw new DocumentClientError("invalid_response", `the ${route} answer is not a page`, {
        status: response.status,
      });
    return body as Page;
  };

  return {
    entities: (documentId, query = {}) => page<EntityPage>(documentId, "entities", query),
    relations: (documentId, query = {}) => page<RelationPage>(documentId, "relations", query),
    pull: (documentId, pullOptions = {}) => pullBytes(documentId, pullOptions.since, pullOptions.waitMs),
    async pullInto(documentId, doc) {
      const empty = doc.oplogVersion().length() === 0;
      const pulled = await pullBytes(documentId, empty ? undefined : encodeVersion(doc.oplogVersion()));
      if (pulled.bytes.byteLength > 0) doc.import(pulled.bytes);
      return { version: pulled.version };
    },
    async planState(documentId, planId) {
      const response = await request(
        documentUrl(documentId, `plans/${encodeURIComponent(planId)}`),
        { method: "GET" },
        await tokenOf(documentId),
      );
      if (response.status !== 200) throw await failure(response, documentId);
      const state = (await response.json().catch(() => undefined)) as PlanState | undefined;
      if (state === undefined || (state.state !== "applied" && state.state !== "unknown"))
        throw new DocumentClientError("invalid_response", "the plan answer is not a plan state", {
          status: response.status,
        });
      return state;
    },
    async changes(documentId, changesOptions = {}) {
      const query = new URLSearchParams();
      if (changesOptions.cursor !== undefined) query.set("cursor", changesOptions.cursor);
      if (changesOptions.limit !== undefined) query.set("limit", String(changesOptions.limit));
      const suffix = query.size === 0 ? "changes" : `changes?${query}`;
      const response = await request(
        documentUrl(documentId, suffix),
        { method: "GET" },
        await tokenOf(documentId),
      );
      if (response.status !== 200) throw await failure(response, documentId);
      const page = (await response.json().catch(() => undefined)) as ChangePage | undefined;
      if (!Array.isArray(page?.changes))
        throw new DocumentClientError("invalid_response", "the changes answer is not a change log page", {
          status: response.status,
        });
      return page;
    },
    async push(documentId, update, pushOptions = {}) {
      const response = await request(
        documentUrl(documentId, pushOptions.applyRemaining === true ? "push?apply_remaining=true" : "push"),
        {
          method: "POST",
          body: update as Uint8Array<ArrayBuffer>,
          headers: { "content-type": "application/octet-stream" },
        },
        await tokenOf(documentId),
      );
      if (response.status !== 200 && response.status !== 422) throw await failure(response, documentId);
      const result = (await response.json().catch(() => undefined)) as PushResult | undefined;
      if (result === undefined || !["committed", "conflicted", "rejected"].includes(result.status)) {
        throw new DocumentClientError("invalid_response", "the push answer is not a push result", {
          status: response.status,
        });
      }
      return result;
    },
    async createDocument(documentId, createOptions) {
      const response = await request(
        `${originOf(documentId)}/documents`,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            documentId,
            token: createOptions.token,
            ...(createOptions.snapshot === undefined
              ? {}
              : { snapshot: Buffer.from(createOptions.snapshot).toString("base64") }),
          }),
        },
        createOptions.adminToken,
      );
      if (response.status === 409) return false;
      if (response.status !== 201) throw await failure(response, documentId);
      return true;
    },
  };
}

/** Codes of a connection closed or reset under a request before any of the answer came. */
const resetCodes = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

/** Whether fetch failed because the connection was closed or reset before any answer. */
function resetBeforeAnswer(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && resetCodes.has(code)) return true;
    cause = cause.cause;
  }
  return false;
}
