/**
 * `storeTurn`: the capture half of the middleware. Writes the user's last message and the answer as
 * two events, in that order, each with a `customId` derived from the turn so a retried call does not
 * store it twice.
 */
import { EVENT_CONTENT_MAXIMUM } from "../schemas/event.ts";
import { MEMORY_SCOPE_VALUES } from "../scope/memory-scope.ts";
import { captureKey } from "./capture-key.ts";
import type { MemoryIdentity } from "./memory-identity.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";
import { lastUserText, type TurnMessage } from "./turn-message.ts";

export async function storeTurn(
  client: MemoryMiddlewareClient,
  identity: MemoryIdentity,
  messages: readonly TurnMessage[],
  response: string,
  signal: AbortSignal,
): Promise<void> {
  const userText = lastUserText(messages);
  if (userText === undefined || response.trim() === "") return;
  const key = await captureKey(identity, messages, response);
  const scope: Record<string, string> = {};
  for (const field of MEMORY_SCOPE_VALUES) if (identity[field] !== undefined) scope[field] = identity[field];
  // Sequential, so the user's event is ordered before the answer.
  await client.writeEvent(
    {
      ...scope,
      role: "user",
      // The longest event the service accepts: a longer turn is captured cut rather than dropped.
      content: userText.slice(0, EVENT_CONTENT_MAXIMUM),
      ...(key === undefined ? {} : { customId: `${key}:user` }),
    },
    { signal },
  );
  await client.writeEvent(
    {
      ...scope,
      role: "assistant",
      content: response.slice(0, EVENT_CONTENT_MAXIMUM),
      infer: false,
      ...(key === undefined ? {} : { customId: `${key}:assistant` }),
    },
    { signal },
  );
}
