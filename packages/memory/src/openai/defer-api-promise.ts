/**
 * `deferApiPromise`: a promise for an OpenAI SDK call that starts after an async step (fetching
 * memory) yet keeps the SDK's `APIPromise` extras — `withResponse()` and `asResponse()`.
 */

/** The part of the SDK's `APIPromise` a caller can reach. */
export interface ApiPromiseLike<Data> extends PromiseLike<Data> {
  withResponse(): Promise<{ data: Data; response: Response; request_id: string | null }>;
  asResponse(): Promise<Response>;
}

export type DeferredApiPromise<Data> = Promise<Data> & {
  withResponse(): Promise<{ data: Data; response: Response; request_id: string | null }>;
  asResponse(): Promise<Response>;
};

/** Boxed, because a promise resolving to a thenable would unwrap it and lose its extras. */
export interface StartedCall<Data> {
  readonly call: ApiPromiseLike<Data>;
}

/**
 * `start` runs now; `transform` sees the parsed data once however the caller reads it (awaiting,
 * `withResponse()`, or both) and may replace it (a stream wrapped for capture).
 */
export function deferApiPromise<Data>(
  start: Promise<StartedCall<Data>>,
  transform: (data: Data) => Data | Promise<Data>,
): DeferredApiPromise<Data> {
  // The caller sees a failure through whichever door they use; the bare start must not go unhandled.
  start.catch(() => {});
  const transformed = new WeakMap<object, Promise<Data>>();
  const once = (data: Data): Promise<Data> => {
    if (typeof data !== "object" || data === null) return Promise.resolve(transform(data));
    let result = transformed.get(data);
    if (result === undefined) {
      result = Promise.resolve(transform(data));
      transformed.set(data, result);
    }
    return result;
  };
  let parsed: Promise<Data> | undefined;
  const data = () => {
    parsed ??= start.then(async (started) => once(await started.call));
    return parsed;
  };
  const promise = {
    // biome-ignore lint/suspicious/noThenProperty: this object is the SDK's promise, deferred
    then: (onFulfilled, onRejected) => data().then(onFulfilled, onRejected),
    catch: (onRejected) => data().catch(onRejected),
    finally: (onFinally) => data().finally(onFinally),
    [Symbol.toStringTag]: "Promise",
    withResponse: async () => {
      const answer = await (await start).call.withResponse();
      return { ...answer, data: await once(answer.data) };
    },
    asResponse: async () => (await start).call.asResponse(),
  } as DeferredApiPromise<Data>;
  return promise;
}
