/** `toMemoryContextBundle`: the service's context bundle as items with provenance, in reading order. */
import type { ContextBundleResponse } from "../schemas/synthesis.ts";
import type { MemoryContextBundle, MemoryContextItem } from "./memory-context-bundle.ts";

export function toMemoryContextBundle(response: ContextBundleResponse): MemoryContextBundle {
  const items: MemoryContextItem[] = [];
  if (response.profile.summary.trim() !== "") {
    items.push({
      id: "profile",
      type: "profile",
      content: response.profile.summary,
      source: response.profile.generatedBy,
    });
  }
  for (const block of response.coreMemory) {
    if (block.value.trim() === "") continue;
    items.push({ id: block.label, type: "core-memory", content: block.value, createdAt: block.updatedAt });
  }
  for (const memory of response.memories) {
    items.push({
      id: memory.id,
      type: "memory",
      kind: memory.kind,
      content: memory.content,
      createdAt: memory.createdAt,
    });
  }
  for (const event of response.recentEvents) {
    items.push({
      id: event.id,
      type: `${event.role} turn`,
      content: event.content,
      ...(event.sessionId === undefined ? {} : { source: `session ${event.sessionId}` }),
      createdAt: event.occurredAt,
    });
  }
  return { items };
}
