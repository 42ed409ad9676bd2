/**
 * Who may use a document over HTTP: the bearer token, host credentials, and the one answer (404) for
 * a document that does not exist and one the token does not open.
 */
import { timingSafeEqual } from "node:crypto";
import type { Hono } from "hono";
import { type DocumentHost, hashToken } from "./document-host.ts";

/** A JSON error body, as every route answers one. */
export const problem = (code: string, message: string, data?: Record<string, unknown>) => ({
  error: { code, message, ...(data === undefined ? {} : { data }) },
});

/** The token of an `Authorization: Bearer …` header, if it carries one. */
export const bearer = (header: string | undefined): string | undefined => {
  const match = /^Bearer\s+(.+)$/i.exec(header ?? "");
  return match?.[1]?.trim();
};

/** Compares in constant time, so a token cannot be found a byte at a time by timing. */
export const sameToken = (token: string, expectedToken: string): boolean =>
  timingSafeEqual(Buffer.from(hashToken(token), "hex"), Buffer.from(hashToken(expectedToken), "hex"));

export interface RouteAccess {
  /** Whether the token is one of the host credentials. */
  isHost(token: string | undefined): boolean;
  /** Answers 404 / 401 / 403, or undefined when the caller may use the document. */
  guard(
    documentId: string,
    authorization: string | undefined,
  ): Promise<{ status: 401 | 404; body: ReturnType<typeof problem> } | undefined>;
}

export function routeAccess(host: DocumentHost, hostTokens: readonly string[]): RouteAccess {
  const hostTokenHashes = hostTokens.map((token) => Buffer.from(hashToken(token), "hex"));
  const isHost = (token: string | undefined): boolean => {
    if (token === undefined || token === "") return false;
    const given = Buffer.from(hashToken(token), "hex");
    return hostTokenHashes.some((expected) => timingSafeEqual(given, expected));
  };
  return {
    isHost,
    async guard(documentId, authorization) {
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
          body: problem("not_found", `no document ${documentId} opens with this token`, {
            resource: "document",
            id: documentId,
          }),
        };
      return undefined;
    },
  };
}

/**
 * Every route of one document behind the same guard, registered once before them: no token 401;
 * another document's token, or a guessed one, answers as a missing document (before the caller's places
 * and the body limits, so no body of a caller without a credential is read).
 */
export function guardDocuments(app: Hono, access: RouteAccess): void {
  app.use("/documents/:documentId/*", async (context, next) => {
    const denied = await access.guard(context.req.param("documentId"), context.req.header("authorization"));
    if (denied !== undefined) return context.json(denied.body, denied.status);
    await next();
  });
}
