/**
 * `captureKey`: the idempotency key of a captured turn, a SHA-256 over the identity and the turn's
 * tail. No clock enters it, so a retried turn yields the same key and the service stores it once.
 */
import { sha256Hex } from "./cache/sha256-hex.ts";
import type { MemoryIdentity } from "./memory-identity.ts";
import type { TurnMessage } from "./turn-message.ts";

/** How much of the conversation's end identifies a turn: enough to tell a repeated "yes" apart. */
export const CAPTURE_TAIL_CHARACTERS = 4_000;

export async function captureKey(
  identity: MemoryIdentity,
  messages: readonly TurnMessage[],
  response: string,
): Promise<string | undefined> {
  const transcript = JSON.stringify(
    messages.filter((message) => message.role !== "system").map((message) => [message.role, message.text]),
  );
  return sha256Hex(
    JSON.stringify([
      identity.agentId ?? null,
      identity.sessionId ?? null,
      identity.userId ?? null,
      transcript.slice(-CAPTURE_TAIL_CHARACTERS),
      response.slice(-CAPTURE_TAIL_CHARACTERS),
    ]),
  );
}
