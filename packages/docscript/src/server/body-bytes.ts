/**
 * The bytes of a credential's request bodies a server holds at once on a document (ADR 0552). Each
 * body is limited (a push 16 MiB) and a credential holds at most 64 requests on a document (ADR 0482),
 * but 64 pushes just under the limit are a gigabyte buffered, and each is imported into a replica
 * while the rest wait their turn on the document: one token's legal flood measured 2.9 GB and 218 s.
 * A body is counted from its declared length (a chunked one as the largest a push may carry) when its
 * request takes its place, before a byte of it is read, and given back once the request is answered.
 * A body past the bound is refused 429 unless it is the caller's only one, so any body under the
 * route's limit can always be sent on its own.
 */
import type { Context, MiddlewareHandler } from "hono";
import { hashToken } from "./document-host.ts";
import { bearer, problem } from "./route-access.ts";

export const defaultMaxBodyBytes = 64 * 1024 * 1024;

export function bodyBytes(options: { maxBodyBytes: number; unknownLength: number }): MiddlewareHandler {
  const held = new Map<string, number>();
  return async (context: Context, next: () => Promise<void>) => {
    if (context.req.method !== "POST") return next();
    const token = bearer(context.req.header("authorization")) ?? "";
    const caller = `${hashToken(token)}/${context.req.param("documentId")}`;
    const declared = Number(context.req.header("content-length"));
    const size = Number.isSafeInteger(declared) && declared >= 0 ? declared : options.unknownLength;
    const already = held.get(caller) ?? 0;
    if (already > 0 && already + size > options.maxBodyBytes) {
      return context.json(
        problem(
          "too_many_requests",
          `this credential's request bodies in flight on this document hold ${already} bytes; ${size} more would pass ${options.maxBodyBytes}; retry in 1 s`,
          { bodyBytes: already, maxBodyBytes: options.maxBodyBytes, retryAfterSeconds: 1 },
        ),
        429,
        { "retry-after": "1" },
      );
    }
    held.set(caller, already + size);
    try {
      await next();
    } finally {
      const left = (held.get(caller) ?? size) - size;
      if (left <= 0) held.delete(caller);
      else held.set(caller, left);
    }
  };
}
