/**
 * One bundle launched as a child speaking MCP over stdio: listed once, called per call, restarted on
 * the next call after it exits (single-flight, with backoff), and failed for good when it exits
 * before its handshake.
 */
import { isDeepStrictEqual } from "node:util";
import { Client, SdkError, SdkErrorCode } from "@modelcontextprotocol/client";
import {
  type ContentBlock,
  type JsonSchema,
  type Logger,
  type ToolAnnotations,
  ToolError,
  type ToolProgress,
  toolContent,
} from "@tackle/core";
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

const stderrTailLength = 2000;
const callTimeoutCeilingMs = 24 * 60 * 60 * 1000;

export class StdioChild {
  readonly source: string;
  readonly #options: StdioChildOptions;
  #session: Session | undefined;
  #starting: Promise<Session> | undefined;
  #permanent: ToolError | undefined;
  #listing: Promise<ChildToolListing[]> | undefined;
  #crashes = 0;
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
    try {
      const outcome = await Promise.race([connecting, transport.exited, handshake]);
      if (outcome !== "connected") {
        transport.kill("SIGKILL");
        const exit = outcome === "timeout" ? await transport.exited : outcome;
        throw this.#failForGood(
          exit,
          await settledTail(transport, () => stderr),
          outcome === "timeout" ? handshakeTimeoutMs : undefined,
          transport.spawnError,
          transport.spawnError,
        );
      }
    } catch (error) {
      if (ToolError.isInstance(error) && error === this.#permanent) throw error;
      transport.kill("SIGKILL");
      const exit = await transport.exited;
      throw this.#failForGood(
        exit,
        await settledTail(transport, () => stderr),
        undefined,
        error,
        transport.spawnError,
      );
    } finally {
      clearTimeout(timer);
    }

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

  #failForGood(
    exit: ChildExit,
    stderr: string,
    timeoutMs: number | undefined,
    cause?: unknown,
    spawnFailure?: Error,
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
    const tail = stderr.trim() === "" ? "" : `; stderr: ${stderr.trim()}`;
    this.#permanent = new ToolError("child_failed", `${this.source} ${reason}${tail}`, {
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

interface CallResult {
  readonly isError?: boolean;
  readonly structuredContent?: Record<string, unknown>;
  readonly content?: readonly ContentBlock[];
}

/**
 * The child's result as it came: its content blocks (text, images, audio, resources) with its
 * structured object beside them. Only when the blocks say nothing but that object (one text block
 * holding its JSON, or none) is the output the plain value, which every MCP server sends back as the
 * same JSON.
 */
function toOutput(tool: string, result: CallResult): unknown {
  const content = result.content ?? [];
  if (result.isError === true) {
    const text = content
      .map((block) => (block.type === "text" ? block.text : ""))
      .join("\n")
      .trim();
    // The MCP SDKs answer a call whose arguments fail the tool's schema as an error result that
    // spells the JSON-RPC code: the caller's input was refused, and the tool did not run.
    if (invalidParamsText.test(text)) throw invalidInput(tool, text, { content });
    throw new ToolError("tool_failed", `Tool "${tool}" failed: ${text || "the child reported an error"}`, {
      data: { tool, content },
    });
  }
  const structured = result.structuredContent;
  if (structured !== undefined && saysOnly(content, structured)) return structured;
  return toolContent(content, structured === undefined ? {} : { structuredContent: structured });
}

function saysOnly(content: readonly ContentBlock[], structured: unknown): boolean {
  if (content.length === 0) return true;
  const [only] = content;
  if (content.length !== 1 || only?.type !== "text") return false;
  try {
    return isDeepStrictEqual(JSON.parse(only.text), structured);
  } catch {
    return false;
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

/** How the MCP SDKs spell an invalid-params refusal in a tool's error result. */
const invalidParamsText = /^MCP error -32602\b/;

/** The child refused the arguments (JSON-RPC -32602), thrown as a protocol error: `invalid_input`. */
function refusedInput(name: string, error: unknown): ToolError | undefined {
  if ((error as { code?: unknown } | null)?.code !== -32602) return undefined;
  return invalidInput(name, (error as Error).message, {});
}

/** A refusal of the caller's arguments, as an in-process tool's schema refuses them (not retryable). */
function invalidInput(tool: string, message: string, data: Record<string, unknown>): ToolError {
  return new ToolError("invalid_input", `Invalid input for tool "${tool}": ${message}`, {
    retryable: false,
    data: { tool, issues: [{ path: [], message }], ...data },
  });
}

/**
 * Arguments nested past the stack (a caller's 100,000 levels fit in a message) cannot be written to
 * the child: the call never reached it, so it is the caller's invalid input, not the tool's failure.
 */
function tooDeepToSend(name: string, source: string, error: unknown): ToolError | undefined {
  if (!(error instanceof RangeError && /call stack/i.test(error.message))) return undefined;
  return new ToolError(
    "invalid_input",
    `Invalid input for tool "${name}": the arguments nest too deeply to send to its child process (${source}); it did not run`,
    {
      retryable: false,
      data: { tool: name, issues: [{ path: [], message: "The arguments nest too deeply to send" }] },
    },
  );
}
