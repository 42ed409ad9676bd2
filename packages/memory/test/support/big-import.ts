/**
 * What the job tests share: an import long enough to be caught mid-job (an import writes a hundred
 * turns in a few statements, ADR 0370, so it must be thousands of turns long), and a poll with a
 * deadline.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { MemoryClient } from "@tackle/memory";

/** Starts importing `conversations` conversations of `perConversation` turns each for user `u`. */
export async function startBigImport(
  client: MemoryClient,
  conversations: number,
  perConversation: number,
): Promise<{ id: string }> {
  const { job } = await client.importConversations({
    userId: "u",
    format: "openai",
    infer: true,
    conversations: Array.from({ length: conversations }, (_, conversation) => ({
      id: `big-${conversation}`,
      messages: Array.from({ length: perConversation }, (_, position) => {
        const index = conversation * perConversation + position;
        return {
          role: index % 2 === 0 ? "user" : "assistant",
          content:
            index % 2 === 0
              ? `I prefer blend number ${index} for the morning tea.`
              : `Noted, blend ${index}.`,
        };
      }),
    })),
  });
  return job;
}

/** What `check` answers once it answers something, polled every `everyMs`; throws past `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
