/** Scope: which identity a memory belongs to. A query's scope is the AND of every field given. */
import { z } from "zod";

/** The canonical identity fields of a memory's scope; every schema and store reuses this tuple. */
export const MEMORY_SCOPE_VALUES = ["userId", "agentId", "sessionId"] as const;

export type MemoryScopeField = (typeof MEMORY_SCOPE_VALUES)[number];

/** The identity a request names. The tenant never appears here: it comes from the API key. */
export type MemoryScope = { readonly [field in MemoryScopeField]?: string | undefined };

/**
 * An identity value: short, printable, no control characters. The class spells out Unicode's Cc
 * range (U+0000–U+001F, U+007F–U+009F) instead of `\p{Cc}`: a pattern with a flag does not survive
 * into JSON Schema, where `pattern` has no flags (the OpenAPI document carried `…$/u`, matching nothing).
 */
export const scopeIdSchema = z
  .string()
  .min(1)
  .max(200)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
  .regex(/^[^\u0000-\u001f\u007f-\u009f]+$/, "must not contain control characters");

/** What each field names; shown to models in every tool and in the OpenAPI document. */
export const MEMORY_SCOPE_DESCRIPTIONS = {
  userId: "End user's id",
  agentId: "Agent's id",
  sessionId: "Conversation's id",
} as const satisfies Record<MemoryScopeField, string>;

const scopeShape = {
  userId: scopeIdSchema.describe(MEMORY_SCOPE_DESCRIPTIONS.userId).optional(),
  agentId: scopeIdSchema.describe(MEMORY_SCOPE_DESCRIPTIONS.agentId).optional(),
  sessionId: scopeIdSchema.describe(MEMORY_SCOPE_DESCRIPTIONS.sessionId).optional(),
} satisfies Record<MemoryScopeField, z.ZodType>;

/** The scope fields as a zod object shape, spread into every request schema. */
export const memoryScopeShape = scopeShape;

export const memoryScopeSchema = z.object(scopeShape);

/**
 * A read across every scope of the tenant is asked for, never implied: reads that search or
 * synthesize take this flag, and without a scope field and without it they are refused (ADR 0366).
 */
export const wholeTenantSchema = z
  .boolean()
  .optional()
  .describe("Read every scope of the tenant; needed when no userId, agentId or sessionId is given");

/** Only the scope fields of `value`, with absent and empty ones dropped. */
export function pickScope(value: object): MemoryScope {
  const scope: Record<string, string> = {};
  for (const field of MEMORY_SCOPE_VALUES) {
    const item = (value as Record<string, unknown>)[field];
    if (typeof item === "string" && item.length > 0) scope[field] = item;
  }
  return scope;
}

/** A stable key for one exact scope (used for core memory blocks and duplicate detection). */
export function scopeKey(scope: MemoryScope): string {
  return JSON.stringify(MEMORY_SCOPE_VALUES.map((field) => scope[field] ?? null));
}

/** True when `record` lies inside `scope`: every field the scope names matches exactly. */
export function scopeContains(scope: MemoryScope, record: MemoryScope): boolean {
  return MEMORY_SCOPE_VALUES.every((field) => scope[field] === undefined || scope[field] === record[field]);
}
