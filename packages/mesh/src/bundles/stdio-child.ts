/**
 * One bundle launched as a child speaking MCP over stdio: listed once, called per call, restarted on
 * the next call after it exits (single-flight, with backoff), and failed for good when it exits
 * before its handshake — unless it has finished one before and a signal from outside killed this
 * start, a few times in a row at most (ADR 0227).
 */
import { Client, SdkError, SdkErrorCode } from "@modelcontextprotocol/client";
import {
  type JsonSchema,
  type Logger,
  type ToolAnnotations,
  ToolError,
  type ToolProgress,
} from "@tackle/core";
import { type CallResult, refusedInput, toOutput, tooDeepToSend } from "./stdio-child-results.ts";
import { type ChildExit, StdioChildTransport } from "./stdio-child-transport.ts";

export interface StdioChildOptions {
  readonly command: string;
  readonly args: readonly string[];
  /** The child's whole environment (the SDK adds only its safe base: HOME, LOGNAME, PATH, SHELL, TERM, USER). */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Names the child in logs and errors (its path). */
  readonly source: string;
  readonly logger: Logger;
  /** Calls allowed in flight at once; later ones wait for a slot. Default 32. */
  readonly maxInFlight?: number;
  /** Time allowed from spawn to a finished MCP handshake. Default 10 s. */
  readonly handshakeTimeoutMs?: number;
  readonly restartBackoff?: {
    readonly initialMs?: number;
    readonly maxMs?: number;
    readonly resetAfterMs?: number;
  };
}

export interface ChildToolListing {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  /**
   * The tool's listing says `_meta: { "tackle/recovers": true }`: on a takeover (ADR 0213) it looks
   * its earlier run up by the key in `_meta` and answers that run's outcome instead of running again.
   */
  readonly recovers: boolean;
  readonly annotations?: ToolAnnotations;
  /**
   * The listing's `execution.taskSupport` is `required`: the tool answers only a task-augmented call
   * (MCP tasks), which the mesh does not send, so it is not served (load-modules says why).
   */
  readonly needsTasks: boolean;
}

interface Session {
  readonly client: Client;
  readonly transport: StdioChildTransport;
  readonly startedAt: number;
  /** Rejects with the exit's ToolError when the child exits; calls race it. */
  readonly exit: Promise<never>;
}

/** What a start that did not finish its handshake met: its exit, the deadline, or the SDK's error. */
interface FailedStart {
  readonly exit?: ChildExit;
  readonly timedOut?: boolean;
  readonly cause?: unknown;
}

const stderrTailLength = 2000;
/**
 * Restarts of a child that has finished a handshake whose start is killed (a signal from outside)
 * before its own: the start that makes this many in a row is failed for good (ADR 0227).
 */
const killedStartsInARow = 5;
const callTimeoutCeilingMs = 24 * 60 * 60 * 1000;

export class StdioChild {
  readonly source: string;
  readonly #options: StdioChildOptions;
  #session: Session | undefined;
  #starting: Promise<Session> | undefined;
  #permanent: ToolError | undefined;
  #listing: Promise<ChildToolListing[]> | undefined;
  #crashes = 0;
  /** A start of this child finished its MCP handshake: later starts are restarts (ADR 0227). */
  #handshaken = false;
  /** Starts in a row killed by an outside signal before their handshake. */
  #killedStarts = 0;
  #lastExitAt = 0;
  #closed = false;
  #inFlight = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(options: StdioChildOptions) {
    this.#options = options;
    this.source = options.source;
  }

  /** Starts the child if needed and lists its tools; asked once per child, whatever restarts follow. */
  listTools(): Promise<ChildToolListing[]> {
    this.#listing ??= (async () => {
      const session = await this.#ensure();
      const listed: ChildToolListing[] = [];
      let cursor: string | undefined;
      do {
        const page = await session.client.listTools(cursor === undefined ? undefined : { cursor });
        for (const tool of page.tools) {
          listed.push({
            name: tool.name,
            description: tool.description ?? "",
            inputSchema: tool.inputSchema as JsonSchema,
            recovers: tool._meta?.["tackle/recovers"] === true,
            needsTasks:
              (tool as { execution?: { taskSupport?: unknown } }).execution?.taskSupport === "required",
            ...(tool.annotations === undefined ? {} : { annotations: tool.annotations as ToolAnnotations }),
          });
        }
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return listed;
    })();
    return this.#listing;
  }

  /**
   * Calls a tool; a child that exits mid-call fails the call at once, naming its exit code or signal.
   * `onProgress` receives the child's progress notifications for this call (the request carries a
   * progress token when it is given).
   */
  async call(
    name: string,
    args: unknown,
    signal: AbortSignal,
    onProgress?: (update: ToolProgress) => void,
    /** The request's `_meta` (the call's idempotency key `tackle/idempotencyKey`, and `tackle/takeover`). */
    meta?: Record<string, unknown>,
  ): Promise<unknown> {
    if (this.#permanent !== undefined) throw this.#permanent;
    await this.#acquireSlot(signal);
    let session: Session | undefined;
    try {
      session = await this.#ensure();
      const result = await Promise.race([
        session.client.callTool(
          {
            name,
            arguments: (args ?? {}) as Record<string, unknown>,
            ...(meta === undefined ? {} : { _meta: meta }),
          },
          {
            signal,
            timeout: callTimeoutCeilingMs,
            ...(onProgress === undefined
              ? {}
              : {
                  onprogress: ({ progress, total, message }) =>
                    onProgress({
                      progress,
                      ...(total === undefined ? {} : { total }),
                      ...(message === undefined ? {} : { message }),
                    }),
                }),
          },
        ),
        session.exit,
      ]);
      return toOutput(name, result as CallResult);
    } catch (error) {
      // The connection went as the call was sent or ran: the SDK gave it up (the child was killed), or
      // the child exited, or this child is closing. The call fails with that, not with the SDK's "Not
      // connected" or "Connection closed" as the tool's failure.
      if (session?.transport.watchesExit === true && (session.transport.lost || connectionGone(error))) {
        if (this.#closed) throw this.#closedError();
        await session.exit;
      }
      throw tooDeepToSend(name, this.source, error) ?? refusedInput(name, error) ?? error;
    } finally {
      this.#releaseSlot();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const session = this.#session ?? (await this.#starting?.catch(() => undefined));
    this.#session = undefined;
    if (session === undefined) return;
    // The SDK's close waits up to seconds for a graceful exit; a hung child gets half a second.
    session.transport.expectClose();
    const graceful = session.client.close().catch(() => undefined);
    const timer = setTimeout(() => session.transport.kill("SIGKILL"), 500);
    await Promise.race([graceful, session.transport.exited]);
    await session.transport.exited;
    clearTimeout(timer);
  }

  #ensure(): Promise<Session> {
    if (this.#permanent !== undefined) return Promise.reject(this.#permanent);
    if (this.#closed) return Promise.reject(this.#closedError());
    const current = this.#session;
    // A child killed because the SDK gave its connection up is still the session until its exit is
    // read: the call waits for that exit (moments) and goes to the child started after it.
    if (current?.transport.lost === true && current.transport.watchesExit)
      return current.exit.catch(() => this.#ensure());
    if (current !== undefined) return Promise.resolve(current);
    this.#starting ??= this.#startAfterBackoff().finally(() => {
      this.#starting = undefined;
    });
    return this.#starting;
  }

  #closedError(): ToolError {
    return new ToolError("child_closed", `${this.source} is closed`);
  }

  async #startAfterBackoff(): Promise<Session> {
    const backoff = this.#options.restartBackoff ?? {};
    if (this.#crashes > 0) {
      const delay = Math.min((backoff.initialMs ?? 100) * 2 ** (this.#crashes - 1), backoff.maxMs ?? 5000);
      const remaining = this.#lastExitAt + delay - Date.now();
      if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
      this.#options.logger.info("restarting stdio child", { source: this.source, attempt: this.#crashes });
    }
    if (this.#closed) throw this.#closedError();
    return this.#start();
  }

  async #start(): Promise<Session> {
    const options = this.#options;
    const transport = new StdioChildTransport({
      command: options.command,
      args: [...options.args],
      env: { ...options.env },
      stderr: "pipe",
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-stderrTailLength);
    });
    const client = new Client({ name: "tackle-mesh", version: "0.1.0" });
    // A log message on stdio names no request, so it cannot be told to which call it belongs: it goes
    // to the node's log, named by the child.
    client.setNotificationHandler("notifications/message", ({ params }) => {
      const level =
        params.level === "debug" || params.level === "info"
          ? params.level
          : params.level === "notice" || params.level === "warning"
            ? "warn"
            : "error";
      options.logger[level]("stdio child log message", {
        source: this.source,
        ...(params.logger === undefined ? {} : { logger: params.logger }),
        data: params.data,
      });
    });
    const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const handshake = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), handshakeTimeoutMs);
    });
    const connecting = client.connect(transport).then(() => "connected" as const);
    connecting.catch(() => {}); // when the exit or the deadline wins the race, its rejection is expected
    let failed: FailedStart | undefined;
    try {
      const outcome = await Promise.race([connecting, transport.exited, handshake]);
      if (outcome === "timeout") failed = { timedOut: true };
      else if (outcome !== "connected") failed = { exit: outcome, cause: transport.spawnError };
    } catch (error) {
      // The SDK refused the handshake or gave the connection up: this side kills the child, so it is
      // permanent. A child's own exit is read before its connection's close: `exited` wins that race.
      failed = { cause: error };
    } finally {
      clearTimeout(timer);
    }
    if (failed !== undefined)
      throw await this.#startFailed(transport, failed, () => stderr, handshakeTimeoutMs);
    this.#handshaken = true;
    this.#killedStarts = 0;

    const startedAt = Date.now();
    let session: Session;
    const exit = transport.exited.then((status) => {
      const error = this.#onExit(session, status, stderr);
      throw error;
    });
    exit.catch(() => {}); // observed by the calls that race it; this keeps an idle child's exit from being unhandled
    session = { client, transport, startedAt, exit };
    this.#session = session;
    return session;
  }

  #onExit(session: Session, exit: ChildExit, stderr: string): ToolError {
    const lost = session.transport.lost
      ? ": it wrote a line past the MCP SDK's 10 MiB read buffer, so it was stopped"
      : "";
    const error = new ToolError(
      "child_exited",
      `${this.source} exited (${describeExit(exit)}) during the call${lost}`,
      {
        retryable: true,
        data: { source: this.source, ...exit, stderr: stderr.slice(-500) },
      },
    );
    if (this.#session === session) this.#session = undefined;
    if (this.#closed) return error;
    if (Date.now() - session.startedAt >= (this.#options.restartBackoff?.resetAfterMs ?? 30_000))
      this.#crashes = 0;
    this.#crashes += 1;
    this.#lastExitAt = Date.now();
    this.#options.logger.warn("stdio child exited; it starts again on its next call", {
      source: this.source,
      code: exit.code,
      signal: exit.signal,
      stderr: stderr.slice(-500),
    });
    return error;
  }

  /**
   * A start that did not finish its handshake. It is failed for good (ADR 0203) unless the bundle has
   * finished a handshake before and this start was killed by a signal from outside (an OOM kill, an
   * operator's): then it counts as a crash (ADR 0227), its callers get `child_exited` and the next call
   * starts it again after the backoff, up to `killedStartsInARow` starts in a row.
   */
  async #startFailed(
    transport: StdioChildTransport,
    failed: FailedStart,
    stderr: () => string,
    handshakeTimeoutMs: number,
  ): Promise<ToolError> {
    transport.kill("SIGKILL");
    const exit = failed.exit ?? (await transport.exited);
    const tail = await settledTail(transport, stderr);
    const killedOutside = failed.timedOut !== true && exit.signal !== null && !transport.killedByHost;
    if (!killedOutside || !this.#handshaken)
      return this.#failForGood(
        exit,
        tail,
        failed.timedOut === true ? handshakeTimeoutMs : undefined,
        failed.cause,
        transport.spawnError,
      );
    if (this.#closed) return this.#closedError();
    this.#killedStarts += 1;
    if (this.#killedStarts >= killedStartsInARow)
      return this.#failForGood(exit, tail, undefined, failed.cause, transport.spawnError, this.#killedStarts);
    this.#crashes += 1;
    this.#lastExitAt = Date.now();
    this.#options.logger.warn(
      "stdio child was killed before its MCP handshake; it starts again on its next call",
      {
        source: this.source,
        signal: exit.signal,
        killedStarts: this.#killedStarts,
        stderr: tail.slice(-500),
      },
    );
    return new ToolError(
      "child_exited",
      `${this.source} exited (${describeExit(exit)}) before its MCP handshake; it starts again on the next call`,
      { retryable: true, data: { source: this.source, ...exit, stderr: tail.slice(-500) } },
    );
  }

  #failForGood(
    exit: ChildExit,
    stderr: string,
    timeoutMs: number | undefined,
    cause?: unknown,
    spawnFailure?: Error,
    /** Starts in a row killed before their handshake, when that is why (ADR 0227). */
    killedStarts?: number,
  ): ToolError {
    // A child that never ran (its command is missing) has no exit status, only the spawn error.
    const spawnError =
      exit.code === null && exit.signal === null && spawnFailure !== undefined
        ? `: ${spawnFailure.message}`
        : "";
    const reason =
      timeoutMs === undefined
        ? `exited before the MCP handshake (${describeExit(exit)})${spawnError}`
        : `did not finish the MCP handshake within ${timeoutMs} ms`;
    const inARow =
      killedStarts === undefined ? "" : ` (${killedStarts} starts in a row killed before their handshake)`;
    const tail = stderr.trim() === "" ? "" : `; stderr: ${stderr.trim()}`;
    this.#permanent = new ToolError("child_failed", `${this.source} ${reason}${inARow}${tail}`, {
      data: { source: this.source, ...exit, stderr },
      ...(cause === undefined ? {} : { cause }),
    });
    this.#options.logger.error("stdio child failed for good", { source: this.source, reason, stderr });
    return this.#permanent;
  }

  async #acquireSlot(signal: AbortSignal): Promise<void> {
    const limit = this.#options.maxInFlight ?? 32;
    if (this.#inFlight < limit) {
      this.#inFlight += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener("abort", onAbort);
        this.#inFlight += 1;
        resolve();
      };
      const onAbort = () => {
        const index = this.#waiting.indexOf(grant);
        if (index >= 0) this.#waiting.splice(index, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(grant);
    });
  }

  #releaseSlot(): void {
    this.#inFlight -= 1;
    this.#waiting.shift()?.();
  }
}

function describeExit(exit: ChildExit): string {
  if (exit.signal !== null) return `signal ${exit.signal}`;
  if (exit.code !== null) return `exit code ${exit.code}`;
  return "exit status unknown";
}

/** The stderr tail once the pipe has drained (bounded: a grandchild may hold it open). */
async function settledTail(transport: StdioChildTransport, tail: () => string): Promise<string> {
  const stream = transport.stderr;
  if (stream !== null && !("readableEnded" in stream && stream.readableEnded)) {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 200);
      stream.once("end", () => {
        clearTimeout(timer);
        resolve(undefined);
      });
    });
  }
  return tail();
}

/** The SDK's word that the child's connection is gone: not (or no longer) connected, or closed mid-call. */
function connectionGone(error: unknown): boolean {
  return (
    error instanceof SdkError &&
    (error.code === SdkErrorCode.NotConnected || error.code === SdkErrorCode.ConnectionClosed)
  );
}
