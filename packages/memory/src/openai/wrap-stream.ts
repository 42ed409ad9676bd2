/**
 * `wrapStream`: the SDK's stream, rebuilt around an iterator that watches each event and calls
 * `onEnd` when the caller has read it to the end (not when they stop early or it fails).
 */
interface StreamLike<Item> extends AsyncIterable<Item> {
  controller?: AbortController;
}

type StreamConstructor<Item> = new (
  iterator: () => AsyncIterator<Item>,
  controller: AbortController | undefined,
  client?: unknown,
) => StreamLike<Item>;

export function isStream(value: unknown): value is StreamLike<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

export function wrapStream<Item>(
  stream: StreamLike<Item>,
  client: unknown,
  observe: (item: Item) => void,
  onEnd: () => Promise<void>,
): StreamLike<Item> {
  async function* watched() {
    for await (const item of stream) {
      observe(item);
      yield item;
    }
    await onEnd();
  }
  // The SDK's own Stream class keeps tee(), toReadableStream() and the abort controller.
  const Stream = stream.constructor as StreamConstructor<Item>;
  if (typeof Stream === "function" && (Stream as unknown) !== Object && "controller" in stream) {
    return new Stream(() => watched(), stream.controller, client);
  }
  return { [Symbol.asyncIterator]: () => watched() };
}
