/**
 * How the document client talks to the server: one request and its whole answer under one deadline and
 * the caller's signal (one retry of a connection reset before any answer; a request refused 429 sent
 * again, ADR 0536), and an error answer turned into a DocumentClientError.
 */
import { ToolAbortedError } from "@tackle/core";
import { checkedMaxRetries, realClock, sendRefusedAgain } from "@tackle/core/internal";
import type { DocumentClientOptions } from "./create-document-client.ts";
import { DocumentClientError } from "./document-client-error.ts";

export const VERSION_HEADER = "docscript-version";
const USER_HEADER = "docscript-user";

export interface Transport {
  originOf(documentId: string): string;
  documentUrl(documentId: string, suffix: string): string;
  request(
    operation: string,
    documentId: string,
    url: string,
    init: RequestInit,
    callerSignal: AbortSignal | undefined,
    how?: RequestHow,
  ): Promise<Answer>;
  failure(response: Answer, documentId: string): DocumentClientError;
}

/** What a request needs beyond its URL and init. */
export interface RequestHow {
  /** The bearer, when not the document's token (the admin's, for a create). */
  readonly token?: string;
  /** False: a 429 goes to the caller at once, never sent again. Default true. */
  readonly sendRefusedAgain?: boolean;
  /** The URL a refused request is sent again to, `waitedMs` after its first send (a waiting pull's). */
  readonly urlAgain?: (waitedMs: number) => string;
}

export function transport(options: DocumentClientOptions): Transport {
  const fetchImpl = options.fetchImpl ?? fetch;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxRetries = checkedMaxRetries(options.maxRetries);
  if (options.userId !== undefined && !headerSafe(options.userId))
    throw new RangeError(`userId ${headerUnsafe}`);
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
    how: RequestHow = {},
  ): Promise<Answer> => {
    // Aborted before the call: nothing is sent.
    if (callerSignal?.aborted) throw aborted(operation, callerSignal);
    const bearer = how.token ?? (await tokenOf(documentId));
    if (callerSignal?.aborted) throw aborted(operation, callerSignal);
    // Refused here, naming no secret: fetch would throw a TypeError quoting the token, or (a character
    // above U+00FF) fail as a retryable network error that no retry can cure.
    if (bearer !== undefined && !headerSafe(bearer))
      throw new DocumentClientError("invalid_request", `the token of document ${documentId} ${headerUnsafe}`);
    const headers = new Headers(init.headers);
    if (bearer !== undefined) headers.set("authorization", `Bearer ${bearer}`);
    if (options.userId !== undefined) headers.set(USER_HEADER, options.userId);
    // One deadline for the request, its resends, the waits between them and the answer's body.
    const firstSentAt = realClock.now();
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal === undefined ? deadline : AbortSignal.any([deadline, callerSignal]);
    let sends = 0;
    const send = async () => {
      sends += 1;
      const target =
        sends > 1 && how.urlAgain !== undefined ? how.urlAgain(realClock.now() - firstSentAt) : url;
      for (let attempt = 1; ; attempt += 1) {
        try {
          const response = await fetchImpl(target, { ...init, headers, signal });
          const bytes = new Uint8Array(await response.arrayBuffer());
          const retryAfter = response.headers.get("retry-after");
          return { status: response.status, headers: response.headers, bytes, retryAfter };
        } catch (error) {
          if (callerSignal?.aborted) throw aborted(operation, callerSignal);
          // A kept-alive connection the server closed as the request went out: the server never read
          // it. Every request here is safe to send again (reads; a push the server stores once, answering
          // `duplicate` when it has the bytes or the plan; a create answering 409), so once, at once.
          if (attempt === 1 && !signal.aborted && resetBeforeAnswer(error)) continue;
          throw new DocumentClientError(
            "network_error",
            `no answer from ${new URL(target).origin}: ${(error as Error).message}`,
            { retryable: true, cause: error },
          );
        }
      }
    };
    // A 429 was refused before the server read it: sent again within the retries and the deadline.
    const { answer, sent } = await sendRefusedAgain(send, {
      maxRetries: how.sendRefusedAgain === false ? 0 : maxRetries,
      deadline: firstSentAt + timeoutMs,
      signal: callerSignal,
      clock: realClock,
      random: Math.random,
      aborted: () => aborted(operation, callerSignal as AbortSignal),
    });
    return { status: answer.status, headers: answer.headers, bytes: answer.bytes, sent };
  };

  return { originOf, documentUrl, request, failure };
}

/** Whether `value` can be sent as an HTTP header's value: no NUL or line break, nothing above U+00FF. */
const headerSafe = (value: string): boolean => /^[^\0\n\r\u0100-\uffff]*$/.test(value);
const headerUnsafe =
  "holds a character an HTTP header cannot carry (a NUL, a line break, or one above U+00FF)";

/** The error of an answer that is not a success: coded by status (401, 403, 404, 429, 5xx, other). */
function failure(response: Answer, documentId: string): DocumentClientError {
  const body = jsonOf(response) as
    | { error?: { code?: string; message?: string; data?: { resource?: unknown; id?: unknown } } }
    | undefined;
  const message = body?.error?.message ?? `HTTP ${response.status}`;
  const status = response.status;
  if (status === 401)
    return new DocumentClientError("unauthorized", `document ${documentId}: ${message}`, { status });
  if (status === 403)
    return new DocumentClientError("forbidden", `document ${documentId}: ${message}`, { status });
  if (status === 404) return notFoundOf(body?.error?.data, documentId, `document ${documentId}: ${message}`);
  const header = response.headers.get("retry-after")?.trim();
  const retryAfter = header ? Number(header) : Number.NaN;
  const retryAfterData =
    Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterSeconds: retryAfter } : {};
  if (status === 429) {
    const sent = response.sent ?? 1;
    const times = sent > 1 ? ` (refused ${sent} times)` : "";
    return new DocumentClientError("too_many_requests", `document ${documentId}: ${message}${times}`, {
      status,
      retryable: true,
      data: {
        serverCode: body?.error?.code,
        ...retryAfterData,
        attempts: sent,
      },
    });
  }
  // 503 `unavailable` (ADR 0492): the store failed for the moment; `data.serverCode` says so, and
  // `data.retryAfterSeconds` how long to wait before sending it again. A 500 is the server's defect.
  if (status >= 500)
    return new DocumentClientError("server_error", `document ${documentId}: ${message}`, {
      status,
      retryable: true,
      data: { serverCode: body?.error?.code, ...retryAfterData },
    });
  return new DocumentClientError("invalid_request", `document ${documentId}: ${message}`, {
    status,
    data: { serverCode: body?.error?.code },
  });
}

/** A 404's resource and id as the server named them; a 404 naming none is the document's. */
function notFoundOf(
  data: { resource?: unknown; id?: unknown } | undefined,
  documentId: string,
  message: string,
): DocumentClientError {
  const named = typeof data?.resource === "string" && typeof data.id === "string";
  return DocumentClientError.notFound(
    named ? (data.resource as string) : "document",
    named ? (data.id as string) : documentId,
    message,
  );
}

/** A whole answer: read inside the request's deadline and signal, so neither can miss its body. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Uint8Array;
  /** How many times the request was sent (more than once when the server refused it 429). */
  readonly sent?: number;
}

/** The answer's JSON body, or undefined when it is not JSON. */
export function jsonOf(answer: Answer): unknown {
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
