/**
 * The import job: OpenAI- or Anthropic-style transcripts and ChatGPT or Claude exports become
 * conversation events (and the memories extracted from user turns). Every event's custom id derives from its content and place,
 * so importing the same transcript again stores nothing new.
 */
import { setImmediate as yieldToRequests } from "node:timers/promises";
import type { z } from "zod";
import { MemoryError } from "../../errors/memory-error.ts";
import type { importConversationsRequestSchema } from "../../schemas/admin.ts";
import {
  EVENT_CONTENT_MAXIMUM,
  type WriteEventRequest,
  type WriteEventResponse,
} from "../../schemas/event.ts";
import { pickScope, scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore, StoredJob } from "../../store/memory-store.ts";
import { digest, importConversations } from "./import-turns.ts";

type ImportInput = z.output<typeof importConversationsRequestSchema>;

export interface ImportDependencies {
  readonly store: MemoryStore;
  readonly now: () => string;
  /** Writes a batch of events in one transaction, all or none (its texts embedded before it begins). */
  readonly writeEvents: (
    tenantId: string,
    requests: readonly WriteEventRequest[],
    /** Commit only while this job is stored and running; else throw `not_found` and store nothing. */
    options: { readonly jobId: string },
  ) => Promise<WriteEventResponse[]>;
  /**
   * Turns written in one transaction (default 100): a transaction per turn cost a commit each — 21 s
   * for 600 turns on PostgreSQL — and a batch is a few statements (ADR 0370).
   */
  readonly turnsPerTransaction?: number;
}

// A Map, not an object: a turn's role is the caller's, and "constructor" or "__proto__" looked up in
// an object literal found an inherited property instead of nothing, failing the whole job.
const roleMap = new Map<string, "user" | "assistant" | "system" | "tool">([
  ["user", "user"],
  ["human", "user"],
  ["assistant", "assistant"],
  ["ai", "assistant"],
  ["model", "assistant"],
  ["system", "system"],
  ["developer", "system"],
  ["tool", "tool"],
  ["function", "tool"],
]);

/** The longest speaker name an import keeps. */
const speakerLimit = 80;

export async function runImport(job: StoredJob, dependencies: ImportDependencies) {
  const input = job.input as ImportInput;
  const scope = pickScope(input);
  let created = 0;
  let existing = 0;
  let memories = 0;
  let skipped = 0;
  let truncated = 0;
  const writes: WriteEventRequest[] = [];
  for (const conversation of importConversations(input)) {
    const sessionId = conversation.sessionId ?? scope.sessionId ?? `import:${conversation.defaultSession}`;
    for (const [index, turn] of conversation.turns.entries()) {
      const role = roleMap.get(turn.role.toLowerCase());
      if (!role || turn.text.trim().length === 0) {
        skipped += 1;
        continue;
      }
      // An event holds 32,000 characters and a speaker 80: a longer turn is stored cut, and counted.
      if (turn.text.length > EVENT_CONTENT_MAXIMUM || (turn.speaker?.length ?? 0) > speakerLimit)
        truncated += 1;
      writes.push({
        ...scope,
        sessionId,
        role,
        content: turn.text.slice(0, EVENT_CONTENT_MAXIMUM),
        // The scope is part of the id: two users importing the same transcript each keep their own turns
        // (custom ids are unique in a tenant; without it the second import's turns were refused).
        customId: `import:${digest(scopeKey(scope), input.format, conversation.key, sessionId, turn.key, turn.text)}`,
        metadata: {
          importJobId: job.id,
          conversation: conversation.label,
          turn: index,
          ...(turn.speaker === undefined ? {} : { speaker: turn.speaker.slice(0, speakerLimit) }),
        },
        ...(turn.at === undefined ? {} : { occurredAt: turn.at }),
        infer: input.infer,
      });
    }
  }
  // A batch commits whole or not at all; a rerun of the job stores what a failed batch did not.
  const batch = Math.max(1, dependencies.turnsPerTransaction ?? 100);
  for (let from = 0; from < writes.length; from += batch) {
    // SQLite's statements run synchronously and its awaits resolve at once: without a turn of the
    // event loop between batches, a 4,000-turn import held the service's requests for seconds.
    await yieldToRequests();
    const answers = await dependencies
      .writeEvents(job.tenantId, writes.slice(from, from + batch), { jobId: job.id })
      .catch((error: unknown) => {
        // Past a quota (ADR 0538) the batch stored nothing and the job fails; its result says what
        // the batches before it stored, and a rerun once there is room stores the rest.
        if (MemoryError.isInstance(error) && error.code === "quota_exceeded") {
          const stored = {
            conversations: input.conversations.length,
            events: { created, existing, skipped, truncated },
            memories,
          };
          throw Object.assign(error, { jobResult: stored });
        }
        throw error;
      });
    for (const answer of answers) {
      if (answer.created) created += 1;
      else existing += 1;
      memories += answer.memories.length;
    }
  }
  return {
    conversations: input.conversations.length,
    events: { created, existing, skipped, truncated },
    memories,
  };
}
