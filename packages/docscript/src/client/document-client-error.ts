/** A failed request to the document server, coded by what the caller can do about it. */
import { ToolError } from "@tackle/core";

/**
 * Codes: `unauthorized` (401: no token), `forbidden` (403: a wrong admin token, or creating is off),
 * `not_found` (404, ADR 0027: `data.resource` `document` when there is no such document or the token
 * does not open it, the server answering both alike; `data.id` the id asked for), `invalid_request` (400/413),
 * `too_many_requests` (429: the credential has its most requests in flight on the document, still so
 * after the client's own `maxRetries`; retryable, `data.retryAfterSeconds` the server's `Retry-After`,
 * `data.attempts` how many sends were refused), `server_error` (5xx, retryable; a 503 is the store failing
 * for the moment, `data.serverCode` `unavailable` and `data.retryAfterSeconds` its `Retry-After`, ADR 0492),
 * `network_error` (no answer, or a timeout; retryable: the push may or may not have landed),
 * `invalid_response`.
 */
export type DocumentClientErrorCode =
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "invalid_request"
  | "too_many_requests"
  | "server_error"
  | "network_error"
  | "invalid_response";

export class DocumentClientError extends ToolError<DocumentClientErrorCode> {
  static override readonly brand: symbol = Symbol.for("tackle.docscript-client-error");
  readonly status: number | undefined;

  constructor(
    code: DocumentClientErrorCode,
    message: string,
    options: { status?: number; retryable?: boolean; cause?: unknown; data?: unknown } = {},
  ) {
    super(code, message, {
      retryable: options.retryable ?? false,
      cause: options.cause,
      data: { status: options.status, ...(options.data as object | undefined) },
    });
    this.name = "DocumentClientError";
    this.status = options.status;
  }

  /** A lookup that found nothing (ADR 0027): `not_found` with the resource and the id asked for. */
  static notFound(resource: string, id: string, message: string, status = 404): DocumentClientError {
    return new DocumentClientError("not_found", message, { status, data: { resource, id } });
  }
}
