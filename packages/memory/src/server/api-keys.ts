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
 * A refusal of the TACKLE_MEMORY_API_KEYS text, naming the entry by position (its number among the
 * entries and its line), never by its key: the key is a secret, and the message reaches logs.
 */
export class ApiKeysConfigError extends Error {
  override readonly name = "ApiKeysConfigError";
  /** The refused entry's number among the entries (from 1; commas and lines separate them). */
  readonly entry: number;
  /** The line the refused entry is on (from 1, comment lines counted). */
  readonly line: number;
  /** For a key listed again: the entry that listed it first. */
  readonly firstEntry: number | undefined;
  constructor(message: string, position: { entry: number; line: number; firstEntry?: number | undefined }) {
    super(message);
    this.entry = position.entry;
    this.line = position.line;
    this.firstEntry = position.firstEntry;
  }
}

/**
 * Parses the TACKLE_MEMORY_API_KEYS format: `key=tenant` entries separated by commas or lines, each
 * optionally bound to an identity with a query: `key=tenant?userId=alice&agentId=travel`. A key listed
 * twice is refused (`ApiKeysConfigError`): the last entry winning would silently rebind a key from
 * one tenant or identity to another.
 */
export function parseApiKeys(text: string): Record<string, ApiKeyEntry> {
  // Maps, made objects with Object.fromEntries (own data properties): a key or a binding field spelled
  // `__proto__` set an object's prototype instead (the key vanished), and `constructor` was found by `in`.
  const keys = new Map<string, { entry: ApiKeyEntry; position: number }>();
  let entry = 0;
  for (const [index, line] of text.split("\n").entries()) {
    // A comment is a whole line, commas and all.
    if (line.trim().startsWith("#")) continue;
    for (const pair of line.split(",")) {
      const trimmed = pair.trim();
      if (trimmed.length === 0) continue;
      entry += 1;
      const position = { entry, line: index + 1 };
      const at = `API key entry ${entry} (line ${index + 1})`;
      const [key, parsed] = parseEntry(trimmed, at, position);
      const first = keys.get(key);
      if (first !== undefined) {
        throw new ApiKeysConfigError(
          `${at} lists the key of entry ${first.position} again: each key may be listed once`,
          { ...position, firstEntry: first.position },
        );
      }
      keys.set(key, { entry: parsed, position: entry });
    }
  }
  return Object.fromEntries([...keys].map(([key, { entry: parsed }]) => [key, parsed]));
}

/** One `key=tenant[?binding]` entry, trimmed; `at` names it in a refusal. */
function parseEntry(
  trimmed: string,
  at: string,
  position: { entry: number; line: number },
): [string, ApiKeyEntry] {
  const question = trimmed.indexOf("?");
  const head = question === -1 ? trimmed : trimmed.slice(0, question);
  const separator = head.lastIndexOf("=");
  if (separator <= 0 || separator === head.length - 1) {
    throw new ApiKeysConfigError(`${at}: entries look like key=tenant; got one without both parts`, position);
  }
  const key = head.slice(0, separator);
  const tenant = head.slice(separator + 1);
  if (question === -1) return [key, tenant];
  const grant = new Map<string, string>([["tenant", tenant]]);
  for (const [field, value] of new URLSearchParams(trimmed.slice(question + 1))) {
    if (grant.has(field)) throw new ApiKeysConfigError(`${at} binds ${field} twice`, position);
    grant.set(field, value);
  }
  if (grant.size === 1) {
    throw new ApiKeysConfigError(
      `${at}: an entry with ? binds an identity: key=tenant?userId=alice`,
      position,
    );
  }
  try {
    return [key, checkGrant(Object.fromEntries(grant) as unknown as ApiKeyGrant)];
  } catch (error) {
    throw new ApiKeysConfigError(`${at}: ${(error as Error).message}`, position);
  }
}
