/** Driving AG-UI streams in tests: a stock HttpAgent's run, the client's own verifier, raw SSE events. */
import assert from "node:assert/strict";
import { type BaseEvent, type HttpAgent, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

/** Runs the agent once, collecting every event it applied. */
export async function drive(
  agent: HttpAgent,
  parameters: Parameters<HttpAgent["runAgent"]>[0] = {},
): Promise<BaseEvent[]> {
  const events: BaseEvent[] = [];
  await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
    },
  });
  return events;
}

/** The client's own verifier over a list of events; throws its AGUIError on a violation. */
export async function verified(events: readonly BaseEvent[]): Promise<BaseEvent[]> {
  return lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
}

/** The raw SSE events of a thread's AG-UI stream, with their ids. */
export async function readEvents(
  url: string,
  init: RequestInit = {},
  stopAfter?: number,
): Promise<{ id: string; event: BaseEvent }[]> {
  const controller = new AbortController();
  const response = await fetch(url, { ...init, signal: controller.signal });
  assert.equal(response.status, 200, await response.clone().text());
  const out: { id: string; event: BaseEvent }[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const id = /^id: ?(.*)$/m.exec(block)?.[1];
        const data = /^data: ?(.*)$/m.exec(block)?.[1];
        if (id !== undefined && data !== undefined) {
          out.push({ id, event: JSON.parse(data) as BaseEvent });
          if (stopAfter !== undefined && out.length >= stopAfter) {
            controller.abort();
            return out;
          }
        }
        end = buffer.indexOf("\n\n");
      }
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  }
  return out;
}
