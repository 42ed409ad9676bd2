/** The episode a conversation event's turn is kept as, so search ranks turns however they arrived (ADR 0361). */
import { createHash } from "node:crypto";

/** The id of the episode kept for an event: one per tenant and event, shaped as a UUID (version 8). */
export function eventEpisodeId(tenantId: string, eventId: string): string {
  const hex = createHash("sha256").update(["event-episode", tenantId, eventId].join("\u0000")).digest("hex");
  const variant = ((Number.parseInt(hex[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * What a user's or an assistant's turn is kept as: `Speaker: text` when the event names its speaker
 * (`metadata.speaker`, or `metadata.name` as OpenAI messages carry it), else the text with the role as
 * its speaker. System and tool events are not turns of the conversation.
 */
export function episodeOf(input: {
  readonly role: string;
  readonly content: string;
  readonly metadata?: Record<string, unknown> | undefined;
}): { content: string; speaker: string } | undefined {
  if (input.role !== "user" && input.role !== "assistant") return undefined;
  const named = [input.metadata?.speaker, input.metadata?.name].find(
    (value): value is string => typeof value === "string" && value.trim().length > 0 && value.length <= 80,
  );
  if (named === undefined) return { content: input.content, speaker: input.role };
  const speaker = named.trim();
  const content = input.content.startsWith(`${speaker}:`) ? input.content : `${speaker}: ${input.content}`;
  return { content, speaker };
}
