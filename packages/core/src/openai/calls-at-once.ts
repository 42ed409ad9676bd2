/** The bound on the calls of one model turn that the OpenAI helpers run at once (ADR 0546). */
import { ToolError } from "../errors/tool-error.ts";

/** Default of `maxConcurrentCalls`. */
export const defaultMaxConcurrentCalls = 64;

/** How many tool calls of one model message the OpenAI helpers run at once. */
export interface ConcurrentCallsOption {
  /**
   * Tool calls of one message run at most this many at once; the rest wait their turn, and answers
   * still come back in the message's order. A model's turn can hold thousands of calls. Default 64;
   * `Infinity` runs them all at once.
   */
  readonly maxConcurrentCalls?: number;
}

/** `answer` for every item, at most `limit` running at once, the answers in the items' order. */
export async function answerAtMost<Item, Answer>(
  items: readonly Item[],
  limit: number | undefined,
  answer: (item: Item) => Promise<Answer>,
): Promise<Answer[]> {
  const bound = checkedLimit(limit);
  const answers: Answer[] = new Array(items.length);
  let next = 0;
  let thrown = false; // a throw (a durable interrupt) ends the turn: no further call starts
  const worker = async () => {
    while (next < items.length && !thrown) {
      const index = next;
      next += 1;
      try {
        answers[index] = await answer(items[index] as Item);
      } catch (error) {
        thrown = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(bound, items.length) }, worker));
  return answers;
}

function checkedLimit(limit: number | undefined): number {
  if (limit === undefined) return defaultMaxConcurrentCalls;
  if (limit === Number.POSITIVE_INFINITY || (Number.isSafeInteger(limit) && limit >= 1)) return limit;
  throw new ToolError(
    "invalid_max_concurrent_calls",
    `maxConcurrentCalls must be a whole number of calls, at least 1, or Infinity (got ${limit})`,
    { data: { maxConcurrentCalls: limit } },
  );
}
