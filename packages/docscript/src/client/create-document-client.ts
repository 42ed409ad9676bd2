/**
 * The document server's client: pull a snapshot or the updates since a version, push an update, ask
 * whether a plan was applied, read the change log.
 */
import { ToolAbortedError } from "@tackle/core";
import type { LoroDoc } from "loro-crdt";
import { encodeVersion } from "../document/version.ts";
import type { ChangePage } from "../server/change-log.ts";
import type {
  EntityPage,
  PlanState,
  RelationPage,
  RowLookup,
  RowLookupAnswer,
} from "../server/document-host.ts";
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
  /** Per request (its retry and its answer's body included). Default 30 000 ms. */
  readonly timeoutMs?: number;
}

/**
 * Every call takes a `signal`: aborting rejects the call with `aborted` (`ToolAbortedError`) at once and
 * closes its connection (a waiting pull's too); a signal aborted before the call sends nothing.
 */
export interface RequestOptions {
  readonly signal?: AbortSignal | undefined;
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
  pull(
    documentId: string,
    options?: { since?: string; waitMs?: number } & RequestOptions,
  ): Promise<PullResult>;
  /** Brings `doc` up to the server's version: a snapshot when it is empty, else the updates it lacks. */
  pullInto(documentId: string, doc: LoroDoc, options?: RequestOptions): Promise<{ version: string }>;
  /** Sends an update; `rejected` and `conflicted` are results, not errors. */
  push(
    documentId: string,
    update: Uint8Array,
    options?: { applyRemaining?: boolean } & RequestOptions,
  ): Promise<PushResult>;
  /**
   * A page of entities in id order, read from the server's stored rows (costs the same at any document
   * size): by kinds and/or ids, after the last id of the previous page; with the version, the
   * document's issues and totals.
   */
  entities(documentId: string, query?: PageQuery, options?: RequestOptions): Promise<EntityPage>;
  /** A page of relations in id order, from the stored rows: by kinds, ids, or an endpoint entity. */
  relations(
    documentId: string,
    query?: PageQuery & { endpoint?: string },
    options?: RequestOptions,
  ): Promise<RelationPage>;
  /**
   * Stored rows by id, or by the members a query finds, at the server's current version (ADR 0466): what
   * a projection that reads rows on demand looks up.
   */
  rows(documentId: string, lookups: readonly RowLookup[], options?: RequestOptions): Promise<RowLookupAnswer>;
  /** Whether the server applied a plan id to the document (`applied`, with the version it reached) or not. */
  planState(documentId: string, planId: string, options?: RequestOptions): Promise<PlanState>;
  /**
   * The document's change log, newest first: `limit` entries (the server's default 50, at most 200);
   * pass a page's `nextCursor` as `cursor` for the older ones.
   */
  changes(
    documentId: string,
    options?: { cursor?: string; limit?: number } & RequestOptions,
  ): Promise<ChangePage>;
  /** Administrative: creates a document that `token` opens. False when it exists. */
  createDocument(
    documentId: string,
    options: { adminToken: string; token: string; snapshot?: Uint8Array } & RequestOptions,
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

  /** One request and its whole answer, under one deadline and the caller's signal. */
  const request = async (
    operation: string,
    documentId: string,
    url: string,
    init: RequestInit,
    callerSignal: AbortSignal | undefined,
    token?: string,
  ): Promise<Answer> => {
    // Aborted before the call: nothing is sent.
    if (callerSignal?.aborted) throw aborted(operation, callerSignal);
    const bearer = token ?? (await tokenOf(documentId));
    if (callerSignal?.aborted) throw aborted(operation, callerSignal);
    const headers = new Headers(init.headers);
    if (bearer !== undefined) headers.set("authorization", `Bearer ${bearer}`);
    if (options.userId !== undefined) headers.set(USER_HEADER, options.userId);
    // One deadline for the request, its retry and the answer's body.
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal === undefined ? deadline : AbortSignal.any([deadline, callerSignal]);
    for (let attempt = 1; ; attempt += 1) {
      try {
        const response = await fetchImpl(url, { ...init, headers, signal });
        const bytes = new Uint8Array(await response.arrayBuffer());
        return { status: response.status, headers: response.headers, bytes };
      } catch (error) {
        if (callerSignal?.aborted) throw aborted(operation, callerSignal);
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

  const failure = (response: Answer, documentId: string): DocumentClientError => {
    const body = jsonOf(response) as { error?: { code?: string; message?: string } } | undefined;
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
    waitMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<PullResult> => {
    const url =
      since === undefined
        ? documentUrl(documentId, "snapshot")
        : `${documentUrl(documentId, "updates")}?since=${encodeURIComponent(since)}${waitMs !== undefined && waitMs > 0 ? `&waitMs=${Math.round(waitMs)}` : ""}`;
    const response = await request("pull", documentId, url, { method: "GET" }, signal);
    if (response.status < 200 || response.status > 299) throw failure(response, documentId);
    const version = response.headers.get(VERSION_HEADER);
    if (version === null)
      throw new DocumentClientError("invalid_response", `the server sent no ${VERSION_HEADER} header`, {
        status: response.status,
      });
    return {
      kind: since === undefined ? "snapshot" : "updates",
      bytes: response.bytes,
      version,
    };
  };

  const page = async <Page>(
    documentId: string,
    route: "entities" | "relations",
    query: PageQuery & { endpoint?: string | undefined },
    signal: AbortSignal | undefined,
  ): Promise<Page> => {
    const params = new URLSearchParams();
    for (const kind of query.kinds ?? []) params.append("kind", kind);
    for (const id of query.ids ?? []) params.append("id", id);
    if (query.ids !== undefined && query.ids.length === 0) params.append("id", "");
    if (query.after !== undefined) params.set("after", query.after);
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    if (query.endpoint !== undefined) params.set("endpoint", query.endpoint);
    const response = await request(
      route,
      documentId,
      `${documentUrl(documentId, route)}?${params}`,
      { method: "GET" },
      signal,
    );
    if (response.status !== 200) throw failure(response, documentId);
    const body = jsonOf(response) as Record<string, unknown> | undefined;
    if (body === undefined || typeof body.version !== "string" || !Array.isArray(body[route]))
      throw new DocumentClientError("invalid_response", `the ${route} answer is not a page`, {
        status: response.status,
      });
    return body as Page;
  };

  return {
    entities: (documentId, query = {}, requestOptions = {}) =>
      page<EntityPage>(documentId, "entities", query, requestOptions.signal),
    relations: (documentId, query = {}, requestOptions = {}) =>
      page<RelationPage>(documentId, "relations", query, requestOptions.signal),
    async rows(documentId, lookups, requestOptions = {}) {
      const response = await request(
        "rows",
        documentId,
        documentUrl(documentId, "rows"),
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ lookups }),
        },
        requestOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const answer = jsonOf(response) as RowLookupAnswer | undefined;
      if (
        typeof answer?.version !== "string" ||
        !Array.isArray(answer.results) ||
        answer.results.length !== lookups.length
      )
        throw new DocumentClientError("invalid_response", "the rows answer is not a lookup answer", {
          status: response.status,
        });
      return answer;
    },
    pull: (documentId, pullOptions = {}) =>
      pullBytes(documentId, pullOptions.since, pullOptions.waitMs, pullOptions.signal),
    async pullInto(documentId, doc, requestOptions = {}) {
      const empty = doc.oplogVersion().length() === 0;
      const pulled = await pullBytes(
        documentId,
        empty ? undefined : encodeVersion(doc.oplogVersion()),
        undefined,
        requestOptions.signal,
      );
      if (pulled.bytes.byteLength > 0) doc.import(pulled.bytes);
      return { version: pulled.version };
    },
    async planState(documentId, planId, requestOptions = {}) {
      const response = await request(
        "planState",
        documentId,
        documentUrl(documentId, `plans/${encodeURIComponent(planId)}`),
        { method: "GET" },
        requestOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const state = jsonOf(response) as PlanState | undefined;
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
        "changes",
        documentId,
        documentUrl(documentId, suffix),
        { method: "GET" },
        changesOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const page = jsonOf(response) as ChangePage | undefined;
      if (!Array.isArray(page?.changes))
        throw new DocumentClientError("invalid_response", "the changes answer is not a change log page", {
          status: response.status,
        });
      return page;
    },
    async push(documentId, update, pushOptions = {}) {
      const response = await request(
        "push",
        documentId,
        documentUrl(documentId, pushOptions.applyRemaining === true ? "push?apply_remaining=true" : "push"),
        {
          method: "POST",
          body: update as Uint8Array<ArrayBuffer>,
          headers: { "content-type": "application/octet-stream" },
        },
        pushOptions.signal,
      );
      if (response.status !== 200 && response.status !== 422) throw failure(response, documentId);
      const result = jsonOf(response) as PushResult | undefined;
      if (result === undefined || !["committed", "conflicted", "rejected"].includes(result.status)) {
        throw new DocumentClientError("invalid_response", "the push answer is not a push result", {
          status: response.status,
        });
      }
      return result;
    },
    async createDocument(documentId, createOptions) {
      const response = await request(
        "createDocument",
        documentId,
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
        createOptions.signal,
        createOptions.adminToken,
      );
      if (response.status === 409) return false;
      if (response.status !== 201) throw failure(response, documentId);
      return true;
    },
  };
}

/** A whole answer: read inside the request's deadline and signal, so neither can miss its body. */
interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Uint8Array;
}

/** The answer's JSON body, or undefined when it is not JSON. */
function jsonOf(answer: Answer): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(answer.bytes));
  } catch {
    return undefined;
  }
}

/** The error of a call its caller aborted: core's `aborted`, naming the operation. */
function aborted(operation: string, signal: AbortSignal): ToolAbortedError {
  return new ToolAbortedError(`docscript.${operation}`, signal.reason);
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
