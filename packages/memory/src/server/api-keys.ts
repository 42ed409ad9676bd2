/** API keys map to tenants; keys are held only as SHA-256 digests and compared by digest. */
import { createHash } from "node:crypto";

export type ApiKeyResolver = (apiKey: string) => string | undefined | Promise<string | undefined>;

function digest(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** `{ "<api key>": "<tenant id>" }` as a resolver that never keeps the raw keys. */
export function apiKeyResolver(keys: Readonly<Record<string, string>>): ApiKeyResolver {
  const byDigest = new Map(Object.entries(keys).map(([key, tenant]) => [digest(key), tenant]));
  return (apiKey) => byDigest.get(digest(apiKey));
}

/** Parses `key=tenant,key2=tenant2` (the TACKLE_MEMORY_API_KEYS format). */
export function parseApiKeys(text: string): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const pair of text.split(/[,\n]/)) {
    const trimmed = pair.trim();
    if (trimmed.length === 0 || trimmed.startsWith("#")) continue;
    const separator = trimmed.lastIndexOf("=");
    if (separator <= 0 || separator === trimmed.length - 1) {
      throw new Error(`API key entries look like key=tenant; got one without both parts`);
    }
    keys[trimmed.slice(0, separator)] = trimmed.slice(separator + 1);
  }
  return keys;
}
