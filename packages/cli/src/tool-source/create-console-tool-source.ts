/**
 * The console tool source: `tools`, `call` and `tackle mcp` through a console already running on this
 * machine. A call's progress comes back on its own request's stream; a call that asks for log lines is
 * made on a client of its own, since a log notification names no request.
 */

import { isDeepStrictEqual } from "node:util";
import {
  Client,
  LOG_LEVEL_META_KEY,
  type LoggingLevel,
  type LoggingMessageNotificationParams,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import {
  type ContentBlock,
  type Logger,
  ToolAbortedError,
  type ToolCallResult,
  ToolError,
  type ToolErrorPayload,
  ToolTimeoutError,
  toolContent,
} from "@tackle/core";
import { modulesToolName, resultBudgetMetaKey } from "../mcp/create-mcp-server.ts";
import { CliError } from "../program/cli-error.ts";
import { parseConsoleUrl } from "./parse-console-url.ts";
import type { ModuleInfo, SourceCallOptions, SourceError, ToolSource } from "./tool-source.ts";

export interface ConsoleSourceOptions {
  /** The console's MCP URL, e.g. `http://127.0.0.1:4270/mcp` (a bare origin gets `/mcp`). */
  readonly url: string;
  readonly token: string;
  readonly timeoutMs?: number;
}

export async function createConsoleToolSource(options: ConsoleSourceOptions): Promise<ToolSource> {
  const url = parseConsoleUrl(options.url);
  const newClient = () =>
    new Client(
      { name: "tackle-cli", version: "0.1.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
  const newTransport = () =>
    new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { authorization: `Bearer ${options.token}` } },
    });
  const connectTimeout = { timeout: options.timeoutMs ?? 10_000 };
  const client = newClient();
  try {
    await client.connect(newTransport(), connectTimeout);
  } catch (error) {
    throw consoleError(url, error, options.token.trim() !== "");
  }

  /**
   * A client for one call whose log lines go to `logger`: every `notifications/message` it receives is
   * that call's. It starts from the shared client's discovery, so it costs no round trip.
   */
  const loggingClient = async (logger: Logger): Promise<Client> => {
    const own = newClient();
    own.setNotificationHandler("notifications/message", (notification) => {
      forwardLogLine(logger, notification.params);
    });
    const discover = client.getDiscoverResult();
    await own.connect(
      newTransport(),
      discover === undefined ? connectTimeout : { ...connectTimeout, prior: { kind: "modern", discover } },
    );
    return own;
  };
  const requestOptions = (timeoutMs: number | undefined, signal?: AbortSignal) => ({
    timeout: timeoutMs ?? options.timeoutMs ?? 60_000,
    ...(signal === undefined ? {} : { signal }),
  });

  let consoleErrors: SourceError[] = [];
  return {
    description: `console ${url.href}`,
    errors: () => consoleErrors,
    async catalogue() {
      const result = await client.callTool(
        { name: modulesToolName, arguments: {} },
        requestOptions(undefined),
      );
      const modules = (result.structuredContent as { modules?: ModuleInfo[] } | undefined)?.modules;
      if (result.isError === true || !Array.isArray(modules)) {
        throw new CliError(
          "console_unavailable",
          `The console at ${url.href} did not list its modules: ${textOf(result.content)}`,
        );
      }
      const reported = (result.structuredContent as { errors?: unknown }).errors;
      consoleErrors = Array.isArray(reported) ? (reported as SourceError[]) : [];
      return modules;
    },
    async call(qualifiedName, args, callOptions = {}) {
      const { onProgress, logger, logLevel, signal } = callOptions;
      // Aborted before the call: nothing is sent.
      if (signal?.aborted) return { ok: false, error: new ToolAbortedError(qualifiedName, signal.reason) };
      // Log lines are asked for only when someone takes them (as the mesh carries them).
      const level = logger === undefined || logLevel === undefined ? undefined : consoleLevel[logLevel];
      let caller = client;
      try {
        if (level !== undefined && logger !== undefined) caller = await loggingClient(logger);
        const result = await caller.callTool(
          {
            name: qualifiedName,
            arguments: (args ?? {}) as Record<string, unknown>,
            // The whole result: whoever reads it here (a person, or `tackle mcp` with its own budget) sizes it.
            _meta: {
              [resultBudgetMetaKey]: "none",
              ...(level === undefined ? {} : { [LOG_LEVEL_META_KEY]: level }),
            },
          },
          {
            ...requestOptions(callOptions.timeoutMs, callOptions.signal),
            // The console sends the tool's progress back on this request's own stream.
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
        );
        return answerOf(result);
      } catch (error) {
        return failureOf(qualifiedName, error, signal, callOptions.timeoutMs ?? options.timeoutMs);
      } finally {
        if (caller !== client) await caller.close().catch(() => undefined);
      }
    },
    close: () => client.close(),
  };
}

/** A tool's answer as the console sent it: its output, or its error rebuilt. */
function answerOf(result: {
  isError?: unknown;
  content?: unknown;
  structuredContent?: unknown;
}): ToolCallResult {
  if (result.isError === true) {
    const payload = (result.structuredContent as { error?: ToolErrorPayload } | undefined)?.error;
    return {
      ok: false,
      error:
        payload === undefined
          ? new ToolError("tool_failed", textOf(result.content))
          : ToolError.fromPayload(payload),
    };
  }
  return { ok: true, output: outputOf(result) };
}

/** A call that got no answer: the caller's abort, its `--timeout`, or the console failing. */
function failureOf(
  qualifiedName: string,
  error: unknown,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
): ToolCallResult {
  // The caller's abort (the SDK has told the console to cancel the call) is `aborted`, as elsewhere.
  if (signal?.aborted) return { ok: false, error: new ToolAbortedError(qualifiedName, signal.reason) };
  // `--timeout` passing is the tool's timeout, as in the other sources, not a console failure.
  if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout && timeoutMs !== undefined) {
    return { ok: false, error: new ToolTimeoutError(qualifiedName, timeoutMs) };
  }
  const overloaded = overloadedError(qualifiedName, error);
  if (overloaded !== undefined) return { ok: false, error: overloaded };
  return {
    ok: false,
    error: new ToolError("console_failed", `The console call failed: ${(error as Error).message}`, {
      retryable: true,
      cause: error,
    }),
  };
}

/**
 * The console past its bound on the token's requests (ADR 0270): 429 with a JSON-RPC error, which the
 * SDK throws with the status and the body's text. It is `overloaded`, retryable, in the console's words.
 */
function overloadedError(qualifiedName: string, error: unknown): ToolError | undefined {
  const http = (error as { data?: { status?: unknown; text?: unknown } } | undefined)?.data;
  if (!(error instanceof SdkError) || http?.status !== 429) return undefined;
  let said: { message?: unknown; data?: { retryAfterSeconds?: unknown } } | undefined;
  try {
    said = (JSON.parse(String(http.text)) as { error?: typeof said }).error;
  } catch {
    said = undefined; // not the console's JSON-RPC error: the SDK's own message says what came back
  }
  const wait = said?.data?.retryAfterSeconds;
  return new ToolError(
    "overloaded",
    `The console refused the call to ${qualifiedName}: ${typeof said?.message === "string" ? said.message : error.message}`,
    { retryable: true, data: typeof wait === "number" ? { retryAfterSeconds: wait } : {}, cause: error },
  );
}

/** The MCP level a call asks the console for: the least severe line the tool logger's level lets through. */
const consoleLevel: Record<NonNullable<SourceCallOptions["logLevel"]>, LoggingLevel> = {
  debug: "debug",
  info: "info",
  warn: "warning",
  error: "error",
};

/**
 * A console's log line to the tool logger it came from: `data` is the line's message, or the message
 * with its fields (as the console sends a line written with fields).
 */
function forwardLogLine(logger: Logger, { level, data }: LoggingMessageNotificationParams): void {
  const write =
    level === "debug" || level === "info"
      ? logger[level]
      : level === "notice" || level === "warning"
        ? logger.warn
        : logger.error;
  if (typeof data === "string") {
    write.call(logger, data);
    return;
  }
  const { message, ...fields } = (typeof data === "object" && data !== null ? data : {}) as Record<
    string,
    unknown
  >;
  if (typeof message === "string") write.call(logger, message, fields);
  else write.call(logger, JSON.stringify(data));
}

function consoleError(url: URL, error: unknown, sentToken: boolean): CliError {
  const message = (error as Error).message ?? String(error);
  if (/401|unauthorized|invalid_token/i.test(message) && sentToken) {
    return new CliError(
      "console_unauthorized",
      `The console at ${url.href} refused the token (401): it does not match the console's token file; use the file it printed when it started (--token-file) or fix TACKLE_CONSOLE_TOKEN`,
      { cause: error },
    );
  }
  if (/401|unauthorized/i.test(message)) {
    return new CliError(
      "console_unauthorized",
      `The console at ${url.href} wants a token (401) and got none: pass --token-file or set TACKLE_CONSOLE_TOKEN`,
      { cause: error },
    );
  }
  return new CliError(
    "console_unavailable",
    `Cannot reach the console at ${url.href}: ${message} (is tackle serve running?)`,
    { cause: error },
  );
}

function textOf(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .filter((block): block is { type: "text"; text: string } => block?.type === "text")
    .map((block) => block.text)
    .join("\n");
}

/**
 * A result back as the output it came from: the console sends a JSON value as one text block of JSON
 * (a plain object also as the structured content); anything else (plain text, images, several blocks)
 * was content blocks, and stays so, so `tackle call` prints the text as text and `tackle mcp` passes
 * the blocks on.
 */
function outputOf(result: { content?: unknown; structuredContent?: unknown }): unknown {
  const structured = result.structuredContent as Record<string, unknown> | undefined;
  const blocks = Array.isArray(result.content) ? (result.content as ContentBlock[]) : [];
  const only = blocks.length === 1 ? blocks[0] : undefined;
  if (only?.type === "text") {
    try {
      const value: unknown = JSON.parse(only.text);
      if (structured === undefined || isDeepStrictEqual(value, structured)) return value;
    } catch {
      // Not JSON: the tool's own text.
    }
  }
  return toolContent(blocks, structured === undefined ? {} : { structuredContent: structured });
}
