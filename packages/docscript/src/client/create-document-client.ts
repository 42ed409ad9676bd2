/**
 * The document server's client: pull a snapshot or the updates since a version, push an update, ask
 * whether a plan was applied, read the change log.
 */
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
import { clientReads } from "./client-reads.ts";
import { jsonOf, transport, VERSION_HEADER } from "./client-transport.ts";
import { DocumentClientError } from "./document-client-error.ts";

export interface DocumentClientOptions {
  /** The server's origin, or one per document (it must not change for a document). */
  readonly origin: string | ((documentId: string) => string);
  /** Bearer token, or one per document. */
  readonly token?: string | ((documentId: string) => string | Promise<string>);
  /** The end user, sent with every request and recorded with each stored update. */
  readonly userId?: string;
  readonly fetchImpl?: typeof fetch;
  /** Per request (its resends, the waits before them and its answer's body included). Default 30 000 ms. */
  readonly timeoutMs?: number;
  /**
   * How many times a request the server refused 429 (`too_many_requests`: refused before its body was
   * read, so safe to send again, a push included) is sent again, after the server's `Retry-After` (up
   * to 30 s) or a jittered backoff, within the request's `timeoutMs`; then the last refusal is the
   * caller's. Not `stage` (a part is only a head start on its push). Default 2; 0 turns it off
   * (ADR 0536).
   */
  readonly maxRetries?: number;
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
   * A pull refused 429 and sent again waits only what is left of `waitMs` since it was first sent.
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
   * Hands the server a part of an update ahead of the push that will carry it whole (ADR 0508): a run
   * stages what it has written so far, and the push's check finds it imported and read. `staged: false`
   * (with the reason) is no failure: the push is judged as any push. A part refused 429 is not sent
   * again (ADR 0536): `too_many_requests` at once.
   */
  stage(
    documentId: string,
    part: Uint8Array,
    options?: RequestOptions,
  ): Promise<{ readonly staged: boolean; readonly reason?: string }>;
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
   * a projection that reads rows on demand looks up. With `issues`, the document's issues too.
   */
  rows(
    documentId: string,
    lookups: readonly RowLookup[],
    options?: { issues?: boolean } & RequestOptions,
  ): Promise<RowLookupAnswer>;
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

export function createDocumentClient(options: DocumentClientOptions): DocumentClient {
  const http = transport(options);
  const { request, failure, documentUrl, originOf } = http;

  const pullBytes = async (
    documentId: string,
    since: string | undefined,
    waitMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<PullResult> => {
    const urlWaiting = (wait: number) =>
      since === undefined
        ? documentUrl(documentId, "snapshot")
        : `${documentUrl(documentId, "updates")}?since=${encodeURIComponent(since)}${wait > 0 ? `&waitMs=${wait}` : ""}`;
    const wait = waitMs === undefined ? 0 : Math.round(waitMs);
    // A waiting pull refused and sent again waits only what is left of its wait (none: a plain pull).
    const response = await request("pull", documentId, urlWaiting(wait), { method: "GET" }, signal, {
      urlAgain: (waitedMs) => urlWaiting(Math.max(0, Math.round(wait - waitedMs))),
    });
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

  return {
    ...clientReads(http),
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
    async stage(documentId, part, stageOptions = {}) {
      const response = await request(
        "stage",
        documentId,
        documentUrl(documentId, "stage"),
        {
          method: "POST",
          body: part as Uint8Array<ArrayBuffer>,
          headers: { "content-type": "application/octet-stream" },
        },
        stageOptions.signal,
        // A part refused is not worth a wait: its push carries it anyway, and the run stops staging.
        { sendRefusedAgain: false },
      );
      if (response.status !== 200) throw failure(response, documentId);
      const answer = jsonOf(response) as { staged?: unknown; reason?: unknown } | undefined;
      if (typeof answer?.staged !== "boolean")
        throw new DocumentClientError("invalid_response", "the stage answer says nothing of staged", {
          status: response.status,
        });
      return typeof answer.reason === "string"
        ? { staged: answer.staged, reason: answer.reason }
        : { staged: answer.staged };
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
        { token: createOptions.adminToken },
      );
      if (response.status === 409) return false;
      if (response.status !== 201) throw failure(response, documentId);
      return true;
    },
  };
}
