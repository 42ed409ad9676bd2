/** A bounded wait for a read that nats.js cannot bound itself (a KV read caught by a dropped connection). */

/** The read ran past its deadline. */
export class ReadDeadline extends Error {}

/** `work`, or a rejection with `ReadDeadline` after `ms`; the timer is cleared either way. */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReadDeadline()), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
