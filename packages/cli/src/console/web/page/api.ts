/** This console's JSON API, the only network the page uses. */

export interface ErrorBody {
  readonly error?: { readonly code?: string; readonly message?: string; readonly data?: unknown };
}

export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody | undefined;
  constructor(status: number, body: ErrorBody | undefined) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** A tool's coded error, as the call's `structuredContent.error` carries it. */
export interface ToolErrorData {
  readonly code: string;
  readonly message: string;
  readonly retryable?: boolean;
  readonly data?: { readonly issues?: readonly Issue[]; readonly [key: string]: unknown };
}

export interface Issue {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

export type CallAnswer = (
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly error: ToolErrorData }
) & {
  /** The tool's own time, as the console measured the MCP call. */
  readonly ms: number;
  /** The MCP `CallToolResult` the outcome was read from. */
  readonly result?: { readonly structuredContent?: unknown; readonly [key: string]: unknown };
};

/** What the page does when a request answers 401 (the sign-in form); set once at boot. */
let onSignedOut: (message: string) => void = () => {};
export function whenSignedOut(handler: (message: string) => void): void {
  onSignedOut = handler;
}

// biome-ignore lint/suspicious/noExplicitAny: JSON from this console's API, read by the page as it knows it.
export type Json = any;

export async function api(path: string, options: { method?: string; body?: unknown } = {}): Promise<Json> {
  const headers: Record<string, string> = {};
  const init: RequestInit = { method: options.method ?? "GET", headers, credentials: "same-origin" };
  if (options.body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  const body = text === "" ? undefined : JSON.parse(text);
  if (response.status === 401 && path !== "/api/session") {
    onSignedOut("Your session ended: sign in again.");
    throw new ApiError(401, body);
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/**
 * Calls module.tool as an MCP client does (`/api/call/stream`): each JSON-RPC message of the exchange
 * goes to `onRpc` as it crosses, then the answer is `{ ok, output | error, ms, result }`. A call that got
 * no answer (the exchange failed, the page signed out) throws.
 */
export async function callTool(
  tool: string,
  args: unknown,
  onRpc: (entry: Json) => void = () => {},
): Promise<CallAnswer> {
  const response = await fetch("/api/call/stream", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ tool, args }),
  });
  if (!response.ok || response.body === null) {
    const body = await response.json().catch(() => undefined);
    if (response.status === 401) onSignedOut("Your session ended: sign in again.");
    throw new ApiError(response.status, body);
  }
  let answer: CallAnswer | undefined;
  let failure: string | undefined;
  await readSse(response.body, (type, _id, data) => {
    const value = JSON.parse(data);
    if (type === "rpc") onRpc(value);
    else if (type === "answer") answer = value;
    else if (type === "failure") failure = value.message;
  });
  if (answer === undefined) throw new Error(failure ?? "The call ended without an answer.");
  return answer;
}

export class CallError extends Error {
  readonly error: ToolErrorData;
  constructor(error: ToolErrorData) {
    super(`${error.code}: ${error.message}`);
    this.error = error;
  }
}

export async function callOrThrow(tool: string, args: unknown): Promise<Json> {
  const answer = await callTool(tool, args);
  if (!answer.ok) throw new CallError(answer.error);
  return answer.output;
}

/** Reads a `text/event-stream` body, calling `onEvent(type, id, data)` for each event. */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  onEvent: (type: string, id: string, data: string) => void,
): Promise<void> {
  const reader = body
    .pipeThrough(new TextDecoderStream() as ReadableWritablePair<string, Uint8Array>)
    .getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      let id = "";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length > 0) onEvent(type, id, data.join("\n"));
      end = buffer.indexOf("\n\n");
    }
  }
}
