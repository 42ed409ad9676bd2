/** A memory as first stored, whether its writes check for duplicates, and the id of an import's fact. */
import { createHash, randomUUID } from "node:crypto";
import type { Memory } from "../schemas/memory.ts";
import { type MemoryScope, scopeKey } from "../scope/memory-scope.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { contentHash } from "./text.ts";

/** A memory as first stored: version 1, active, no feedback, outcomes or accesses yet. */
export function newMemory(
  tenantId: string,
  at: string,
  fields: {
    id?: string | undefined;
    scope: MemoryScope;
    content: string;
    kind: Memory["kind"];
    metadata?: Record<string, unknown> | undefined;
    /** What the metadata is charged when not its JSON bytes: 0 for metadata the service wrote (ADR 0563). */
    metadataCharge?: number | undefined;
    importance?: number | undefined;
    provenance: Memory["provenance"];
    dedupe: boolean;
    embedding: Float32Array | undefined;
  },
): StoredMemory {
  const id = fields.id ?? randomUUID();
  return {
    id,
    tenantId,
    kind: fields.kind,
    content: fields.content,
    ...fields.scope,
    metadata: fields.metadata ?? {},
    provenance: fields.provenance,
    version: 1,
    status: "active",
    importance: fields.importance ?? 0.5,
    feedback: { helpful: 0, unhelpful: 0 },
    outcomes: { successes: 0, failures: 0 },
    accessCount: 0,
    createdAt: at,
    updatedAt: at,
    dedupeKey: fields.dedupe ? contentHash(fields.content) : id,
    ...(fields.embedding ? { embedding: fields.embedding } : {}),
    ...(fields.metadataCharge === undefined ? {} : { metadataCharge: fields.metadataCharge }),
  };
}

/**
 * Whether a write is checked for duplicates: the caller's `dedupe`, else on for every kind but
 * `episode`. An episode is something that happened (a conversation turn): a repeated "Haha, totally"
 * is a second turn with its own date and neighbours, which temporal and context retrieval need.
 */
export function dedupeByDefault(input: {
  readonly dedupe?: boolean | undefined;
  readonly kind: Memory["kind"];
}) {
  return input.dedupe ?? input.kind !== "episode";
}

/**
 * The id a memory extracted by an import gets: one per tenant, scope and fact (its normalized text), so
 * an import run again (a job resumed after a crash, the same transcript imported twice) finds the
 * memory it made the first time in whatever state the user left it (deleted, edited, merged) and
 * never makes it again. Shaped as a UUID (version 8: derived by the application).
 */
export function importedMemoryId(tenantId: string, scope: MemoryScope, content: string): string {
  const hex = createHash("sha256")
    .update(["import-memory", tenantId, scopeKey(scope), contentHash(content)].join("\u0000"))
    .digest("hex");
  const variant = ((Number.parseInt(hex[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
