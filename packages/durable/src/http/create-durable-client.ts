/** The client of the durable HTTP API: start, get, resume, and frames that reconnect from the last seq. */
import { ToolAbortedError, ToolError, type ToolErrorPayload, ToolTimeoutError } from "@tackle/core";
import { checkedMaxRetries, realClock, refusedRetryDelay, sendRefusedAgain } from "@tackle/core/internal";
import { DurableError } from "../errors/durable-error.ts";
import type { Answers } from "../runner/create-runner.ts";
import type { Checkpoint } from "../runner/history.ts";
import type { RunSnapshot } from "../runner/run-snapshot.ts";
import type { Frame } from "../store/durable-store.ts";

export interface DurableClientOptions {
  readonly baseUrl: string;
  readonly fetch?: typeof fetch;
  readonly headers?: Record<string, string>;
  /** Wait between reconnects of a dropped stream. Default 250 ms. */
  readonly reconnectDelayMs?: number;
  /**
   * How long `frames` keeps reconnecting while the server does not answer at all before it fails
   * `unreachable` (a restart is ridden out; an outage is told, not waited out forever). Default 30 s.
   */
  readonly unreachableAfterMs?: number;
  /**
   * Per `start`, `get` and `resume` (its one resend and the answer's body included): past it the call
   * fails `timeout` (`ToolTimeoutError`). Default 30 000 ms. `frames` waits this long for
   * each connection's answer to begin, then as long as the run lasts.
   */
  readonly timeoutMs?: number;
  /**
   * How many times a call the server refused 429 (`too_many_requests`, `too_many_runs`: refused before
   * it ran, so safe to send again whatever it is) is sent again, after the server's `Retry-After` (up to
   * 30 s) or a jittered backoff, within the call's `timeoutMs`: the last refusal is the caller's. A
   * `frames` connection refused so is tried again as many times. Default 2; 0 turns it off (ADR 0120).
   */
  readonly maxRetries?: number;
}

/**
 * Every call takes a `signal`: aborting rejects it with `aborted` (`ToolAbortedError`) at once and
 * closes its connection (or ends its wait to send a refused call again); a signal aborted before the
 * call sends nothing. A `start` or `resume` aborted after it was sent may have landed on the server.
 */
export interface DurableCallOptions {
  readonly signal?: AbortSignal | undefined;
}

/**
 * A call whose kept-alive connection is closed or reset before any of the answer came is sent once
 * more only when sending it twice cannot do anything twice: `get`; `resume` with answers (answers are
 * keyed by interrupt id, and an approval's id binds the tool call and its arguments' fingerprint, so a
 * resume that already landed is a harmless replay); `start` given both a `threadId` and a `runId` (the
 * server answers the run it already started). A `start` without them is never sent again after such
 * a reset: the first may have started a run. Any call the server refused 429 is sent again (`maxRetries`): the server
 * refuses so before it reads the body, or before it stores anything, so the first did nothing.
 */
export interface DurableClient {
  start(
    graph: string,
    input: unknown,
    options?: { threadId?: string; runId?: string } & DurableCallOptions,
  ): Promise<{ threadId: string; runId: string }>;
  get<State = Record<string, unknown>>(
    threadId: string,
    options?: DurableCallOptions,
  ): Promise<RunSnapshot<State>>;
  resume(
    threadId: string,
    answers: Answers,
    options?: DurableCallOptions,
  ): Promise<{ threadId: string; runId: string }>;
  /**
   * The thread's states step by step, oldest first (`runId` for one run's): `Runner.history` over HTTP.
   * Fails `not_found` (resource `run`) for a thread the server does not hold.
   */
  history<State = Record<string, unknown>>(
    threadId: string,
    options?: { runId?: string } & DurableCallOptions,
  ): Promise<Checkpoint<State>[]>;
  /**
   * Time travel: a new thread from the checkpoint at `seq` (its state, `input` merged over it), run on
   * from the node that came next there; answers the new run once it pauses or ends (`Runner.fork`).
   * Fails `invalid_request` for a seq with no checkpoint or nothing after it, `thread_exists` when the
   * new thread id is taken. Never sent twice.
   */
  fork<State = Record<string, unknown>>(
    threadId: string,
    options: { seq: number; threadId?: string; runId?: string; input?: Partial<State> } & DurableCallOptions,
  ): Promise<RunSnapshot<State>>;
  /**
   * The run's frames from `afterSeq`, reconnecting with Last-Event-ID when the stream drops, until the
   * run pauses or ends. Aborting `signal` ends it with `aborted`.
   */
  frames(threadId: string, options?: { afterSeq?: number; signal?: AbortSignal }): AsyncIterable<Frame>;
}

export function createDurableClient(options: DurableClientOptions): DurableClient {
  const server: Server = {
    fetcher: options.fetch ?? fetch,
    base: options.baseUrl.replace(/\/$/, ""),
    timeoutMs: options.timeoutMs ?? 30_000,
    headers: options.headers ?? {},
    unreachableAfterMs: options.unreachableAfterMs ?? 30_000,
    reconnectDelayMs: options.reconnectDelayMs ?? 250,
    maxRetries: checkedMaxRetries(options.maxRetries),
  };
  const call = <T>(
    operation: string,
    path: string,
    init: RequestInit,
    idempotent: boolean,
    signal: AbortSignal | undefined,
  ) => callServer<T>(server, operation, path, init, idempotent, signal);

  return {
    start: (graph, input, { signal, ...startOptions } = {}) =>
      call(
        "start",
        "/runs",
        { method: "POST", body: JSON.stringify({ graph, input, ...startOptions }) },
        startOptions.threadId !== undefined && startOptions.runId !== undefined,
        signal,
      ),
    get: (threadId, getOptions = {}) =>
      call("get", `/runs/${encodeURIComponent(threadId)}`, {}, true, getOptions.signal),
    resume: (threadId, answers, resumeOptions = {}) =>
      call(
        "resume",
        `/runs/${encodeURIComponent(threadId)}/resume`,
        { method: "POST", body: JSON.stringify({ answers }) },
        Object.keys(answers).length > 0,
        resumeOptions.signal,
      ),
    history: async (threadId, { signal, runId } = {}) => {
      // The server answers a page at a time (ADR 0122); the client reads them all.
      const checkpoints: Checkpoint<never>[] = [];
      let afterSeq: number | undefined = 0;
      while (afterSeq !== undefined) {
        const query = `?afterSeq=${afterSeq}${runId === undefined ? "" : `&runId=${encodeURIComponent(runId)}`}`;
        const page: { checkpoints: Checkpoint<never>[]; nextAfterSeq?: number } = await call(
          "history",
          `/runs/${encodeURIComponent(threadId)}/history${query}`,
          {},
          true,
          signal,
        );
        checkpoints.push(...page.checkpoints);
        afterSeq = page.nextAfterSeq;
      }
      return checkpoints;
    },
    fork: (threadId, { signal, ...forkOptions }) =>
      call(
        "fork",
        `/runs/${encodeURIComponent(threadId)}/fork`,
        { method: "POST", body: JSON.stringify(forkOptions) },
        false,
        signal,
      ),
    frames: (threadId, frameOptions = {}) => followFrames(server, threadId, frameOptions),
  };
}

/** Where and how a client reaches its server. */
interface Server {
  readonly fetcher: typeof fetch;
  readonly base: string;
  readonly timeoutMs: number;
  readonly headers: Record<string, string>;
  readonly unreachableAfterMs: number;
  readonly reconnectDelayMs: number;
  readonly maxRetries: number;
}

async function callServer<T>(
  { fetcher, base, timeoutMs, headers, maxRetries }: Server,
  operation: string,
  path: string,
  init: RequestInit,
  idempotent: boolean,
  callerSignal: AbortSignal | undefined,
): Promise<T> {
  // Aborted before the call: nothing is sent.
  if (callerSignal?.aborted) throw aborted(operation, callerSignal);
  // One deadline for the request, its resends, the waits between them and the answer's body.
  const deadlineAt = realClock.now() + timeoutMs;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = callerSignal === undefined ? deadline : AbortSignal.any([deadline, callerSignal]);
  const request = () =>
    fetcher(`${base}${path}`, {
      ...init,
      signal,
      headers: {
        "content-type": "application/json",
        ...headers,
        ...(init.headers as Record<string, string>),
      },
    });
  const send = async () => {
    let response: Response;
    try {
      response = await request();
    } catch (error) {
      // A kept-alive connection closed or reset before any answer: the request may or may not have
      // landed, so only a call that is harmless twice is sent once more.
      if (!idempotent || signal.aborted || !resetBeforeAnswer(error)) throw error;
      response = await request();
    }
    const text = await response.text();
    return { status: response.status, retryAfter: response.headers.get("retry-after"), text };
  };
  let answer: Awaited<ReturnType<typeof send>>;
  let sent: number;
  try {
    // A 429 was refused before it ran: sent again within the retries and the deadline (ADR 0120).
    ({ answer, sent } = await sendRefusedAgain(send, {
      maxRetries,
      deadline: deadlineAt,
      signal: callerSignal,
      clock: realClock,
      random: Math.random,
      aborted: () => aborted(operation, callerSignal as AbortSignal),
    }));
  } catch (error) {
    if (callerSignal?.aborted) throw aborted(operation, callerSignal);
    if (deadline.aborted) throw new ToolTimeoutError(`durable.${operation}`, timeoutMs);
    throw error;
  }
  const body = parseJson(answer.text) as { error?: ToolErrorPayload };
  if (answer.status < 200 || answer.status > 299) throw errorOf(answer.status, body.error, sent);
  return body as T;
}

/**
 * The error of an answer that is not a success, as the server coded it; a 429 says how many sends it
 * refused (`data.attempts`).
 */
function errorOf(status: number, payload: ToolErrorPayload | undefined, sent: number): ToolError {
  const error = ToolError.fromPayload(payload ?? { code: "http_error", message: `HTTP ${status}` });
  if (status !== 429) return error;
  const data = typeof error.data === "object" && error.data !== null ? error.data : {};
  return new ToolError(error.code, sent > 1 ? `${error.message} (refused ${sent} times)` : error.message, {
    retryable: error.retryable,
    data: { ...data, attempts: sent },
  });
}

/**
 * The run's frames from `afterSeq`, reconnecting with Last-Event-ID when the stream drops, until the
 * run pauses or ends.
 */
async function* followFrames(
  { fetcher, base, timeoutMs, headers, unreachableAfterMs, reconnectDelayMs, maxRetries }: Server,
  threadId: string,
  frameOptions: { afterSeq?: number; signal?: AbortSignal },
): AsyncIterable<Frame> {
  let lastSeq = frameOptions.afterSeq ?? 0;
  let answeredAt = Date.now();
  // Connections refused 429 in a row: tried again as a call is, without a deadline but the signal's.
  let refused = 0;
  const signal = frameOptions.signal;
  for (;;) {
    if (signal?.aborted) throw aborted("frames", signal);
    let ended = false;
    let retryInMs: number | undefined;
    // The caller's signal ends the stream; a server that accepts and never answers ends this attempt.
    const connection = new AbortController();
    const forward = () => connection.abort(signal?.reason);
    signal?.addEventListener("abort", forward, { once: true });
    const silence = setTimeout(
      () => connection.abort(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    try {
      const response = await fetcher(`${base}/runs/${encodeURIComponent(threadId)}/frames`, {
        headers: { accept: "text/event-stream", "last-event-id": String(lastSeq), ...headers },
        signal: connection.signal,
      });
      clearTimeout(silence);
      answeredAt = Date.now();
      if (!response.ok || response.body === null) {
        const body = (await response.json().catch(() => ({}))) as { error?: ToolErrorPayload };
        if (response.status === 429) {
          refused += 1;
          retryInMs = refusedRetryDelay({
            maxRetries,
            retry: refused,
            retryAfter: response.headers.get("retry-after"),
            now: realClock.now(),
            deadline: Number.POSITIVE_INFINITY,
            nowEpochMs: Date.now(),
            random: Math.random,
          });
        }
        if (retryInMs === undefined) throw errorOf(response.status, body.error, refused);
      } else {
        refused = 0;
        for await (const frame of parseFrames(response.body)) {
          lastSeq = frame.seq;
          yield frame;
        }
        ended = true;
      }
    } catch (error) {
      if (signal?.aborted) throw aborted("frames", signal);
      if (ToolError.isInstance(error)) throw error;
      // A dropped connection: reconnect from the last seq seen, unless nothing has answered for too long.
      if (Date.now() - answeredAt >= unreachableAfterMs) {
        throw new DurableError(
          "unreachable",
          `The durable server at ${base} has not answered for ${Math.round((Date.now() - answeredAt) / 1000)} s: ${(error as Error).message}`,
          { retryable: true, cause: error },
        );
      }
    } finally {
      clearTimeout(silence);
      signal?.removeEventListener("abort", forward);
      // A stream left (ended, dropped, or the caller stopped reading) closes its connection.
      connection.abort();
    }
    if (ended) return;
    await pause(retryInMs ?? reconnectDelayMs, signal);
  }
}

async function* parseFrames(body: ReadableStream<Uint8Array>): AsyncIterable<Frame> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end === -1) break;
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data !== "") yield JSON.parse(data) as Frame;
    }
  }
}

/** The error of a call its caller aborted: core's `aborted`, naming the operation. */
function aborted(operation: string, signal: AbortSignal): ToolAbortedError {
  return new ToolAbortedError(`durable.${operation}`, signal.reason);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

/** Waits `milliseconds`, or less when `signal` aborts (the caller then sees it aborted). */
function pause(milliseconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, milliseconds);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Codes of a connection closed or reset under a request before any of the answer came. */
const resetCodes = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

/** Whether fetch failed because the connection was closed or reset before any answer. */
function resetBeforeAnswer(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && resetCodes.has(code)) return true;
    cause = cause.cause;
  }
  return false;
}
