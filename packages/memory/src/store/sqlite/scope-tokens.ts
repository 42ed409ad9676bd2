/** Scope as words for the full-text index: one opaque token per tenant and per identity field given. */
import { createHash } from "node:crypto";
import { MEMORY_SCOPE_VALUES, type MemoryScope } from "../../scope/memory-scope.ts";

const prefixes = { userId: "u", agentId: "a", sessionId: "s" } as const;

function token(prefix: string, value: string): string {
  return `${prefix}${createHash("sha256").update(value).digest("hex").slice(0, 24)}`;
}

/** Every token a memory carries: its tenant and each scope field it has. */
export function scopeTokens(tenantId: string, scope: MemoryScope): string[] {
  const tokens = [token("t", tenantId)];
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = scope[field];
    if (value !== undefined) tokens.push(token(prefixes[field], value));
  }
  return tokens;
}

/**
 * One query word as an FTS5 string: everything but letters and digits is removed before quoting, so
 * text handed to the store can never become FTS5 syntax (operators, column filters, prefixes, NEAR).
 * Empty when nothing is left.
 */
export function ftsWord(term: string): string {
  const word = term.replace(/[^\p{L}\p{N}]/gu, "");
  if (word.length === 0) return "";
  return term.endsWith("*") ? `"${word}"*` : `"${word}"`;
}

/** Any of the words, or "" when no word is left after escaping. */
export function anyWord(terms: readonly string[], joiner = " OR "): string {
  return terms.map(ftsWord).filter(Boolean).join(joiner);
}

/** The FTS5 query: all of the scope's tokens AND any of the words ("" when there is no word). */
export function scopedMatch(
  tenantId: string,
  scope: MemoryScope,
  terms: readonly string[],
  every = false,
): string {
  const required = scopeTokens(tenantId, scope)
    .map((item) => `"${item}"`)
    .join(" AND ");
  const words = anyWord(terms, every ? " AND " : " OR ");
  if (words.length === 0) return "";
  return `scope : (${required}) AND content : (${words})`;
}
