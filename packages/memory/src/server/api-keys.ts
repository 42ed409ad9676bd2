/**
 * API keys map to tenants, and optionally bind their holder to one identity (ADR 0357); keys are held
 * only as SHA-256 digests and compared by digest.
 */
import { createHash } from "node:crypto";
import { scopeIdSchema } from "../scope/memory-scope.ts";

/** The identity fields a key can be bound to. A session is not: one key per conversation is not the model. */
export const API_KEY_BINDING_FIELDS = ["userId", "agentId"] as const;
export type ApiKeyBindingField = (typeof API_KEY_BINDING_FIELDS)[number];

/** What a key grants: its tenant and, for a bound key, the identity every request acts as. */
export interface ApiKeyGrant {
  readonly tenant: string;
  readonly userId?: string;
  readonly agentId?: string;
}

/** A key's tenant (an unbound key), or its tenant and bound identity. */
export type ApiKeyEntry = string | ApiKeyGrant;

export type ApiKeyResolver = (apiKey: string) => ApiKeyEntry | undefined | Promise<ApiKeyEntry | undefined>;

function digest(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** Checks a grant's identity values; an empty or unknown binding field is a configuration error. */
export function checkGrant(entry: ApiKeyEntry): ApiKeyGrant {
  if (typeof entry === "string") return { tenant: entry };
  if (typeof entry.tenant !== "string" || entry.tenant.length === 0) {
    throw new Error("An API key's grant needs a tenant");
  }
  for (const field of Object.keys(entry)) {
    if (field === "tenant") continue;
    if (!(API_KEY_BINDING_FIELDS as readonly string[]).includes(field)) {
      throw new Error(`An API key can be bound to ${API_KEY_BINDING_FIELDS.join(" and ")}, not "${field}"`);
    }
    const value = (entry as unknown as Record<string, unknown>)[field];
    if (value === undefined) continue;
    if (!scopeIdSchema.safeParse(value).success) {
      throw new Error(`An API key's ${field} must be 1 to 200 printable characters`);
    }
  }
  return entry;
}

/** `{ "<api key>": tenant | { tenant, userId?, agentId? } }` as a resolver that never keeps the raw keys. */
export function apiKeyResolver(keys: Readonly<Record<string, ApiKeyEntry>>): ApiKeyResolver {
  const byDigest = new Map(Object.entries(keys).map(([key, entry]) => [digest(key), checkGrant(entry)]));
  return (apiKey) => byDigest.get(digest(apiKey));
}

/**
 * Parses the TACKLE_MEMORY_API_KEYS format: `key=tenant` entries separated by commas or lines, each
 * optionally bound to an identity with a query: `key=tenant?userId=alice&agentId=travel`.
 */
export function parseApiKeys(text: string): Record<string, ApiKeyEntry> {
  // Maps, made objects with Object.fromEntries (own data properties): a key or a binding field spelled
  // `__proto__` set an object's prototype instead (the key vanished), and `constructor` was found by `in`.
  const keys = new Map<string, ApiKeyEntry>();
  // A comment is a whole line, commas and all.
  const lines = text.split("\n").filter((line) => !line.trim().startsWith("#"));
  for (const pair of lines.join("\n").split(/[,\n]/)) {
    const trimmed = pair.trim();
    if (trimmed.length === 0) continue;
    const question = trimmed.indexOf("?");
    const head = question === -1 ? trimmed : trimmed.slice(0, question);
    const separator = head.lastIndexOf("=");
    if (separator <= 0 || separator === head.length - 1) {
      throw new Error(`API key entries look like key=tenant; got one without both parts`);
    }
    const key = head.slice(0, separator);
    const tenant = head.slice(separator + 1);
    if (question === -1) {
      keys.set(key, tenant);
      continue;
    }
    const grant = new Map<string, string>([["tenant", tenant]]);
    for (const [field, value] of new URLSearchParams(trimmed.slice(question + 1))) {
      if (grant.has(field)) throw new Error(`An API key entry binds ${field} twice`);
      grant.set(field, value);
    }
    if (grant.size === 1) {
      throw new Error("An API key entry with ? binds an identity: key=tenant?userId=alice");
    }
    keys.set(key, checkGrant(Object.fromEntries(grant) as unknown as ApiKeyGrant));
  }
  return Object.fromEntries(keys);
}
