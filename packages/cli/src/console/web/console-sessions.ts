/**
 * Sign-in for the console's web page: a one-time login code (printed at start, in the sign-in URL)
 * is exchanged for a session id, carried by an HttpOnly, SameSite=Strict cookie.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";

export const sessionCookie = "tackle_console";

export interface ConsoleSessions {
  /** The code in the sign-in URL; it works once. */
  readonly loginCode: string;
  /** Exchanges the login code (or the console's bearer token) for a new session id; undefined if refused. */
  redeem(secret: string): string | undefined;
  /** True for a session id this console issued and that has not expired. */
  valid(sessionId: string | undefined): boolean;
  /** Ends a session. */
  end(sessionId: string | undefined): void;
}

export interface ConsoleSessionsOptions {
  /** The console's bearer token: accepted at sign-in as well, so a person can sign in again after the code was used. */
  readonly token: string;
  /** How long a session lasts. Default 12 hours. */
  readonly sessionMs?: number;
  readonly now?: () => number;
}

export function createConsoleSessions(options: ConsoleSessionsOptions): ConsoleSessions {
  const sessionMs = options.sessionMs ?? 12 * 60 * 60 * 1000;
  const now = options.now ?? Date.now;
  const loginCode = randomBytes(24).toString("base64url");
  let codeUsed = false;
  const sessions = new Map<string, number>();

  return {
    loginCode,
    redeem(secret) {
      const byCode = !codeUsed && same(secret, loginCode);
      if (!byCode && !same(secret, options.token)) return undefined;
      if (byCode) codeUsed = true;
      const id = randomBytes(32).toString("base64url");
      sessions.set(id, now() + sessionMs);
      return id;
    },
    valid(sessionId) {
      if (sessionId === undefined) return false;
      const expires = sessions.get(sessionId);
      if (expires === undefined) return false;
      if (expires <= now()) {
        sessions.delete(sessionId);
        return false;
      }
      return true;
    },
    end(sessionId) {
      if (sessionId !== undefined) sessions.delete(sessionId);
    },
  };
}

function same(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
