/**
 * The console's MCP endpoint behind its guards (loopback, bearer token), in three parts:
 *
 * - a 2025-era client that initializes gets a session (`Mcp-Session-Id`): one server and one
 *   streamable HTTP transport for the session's life, instead of one per request. Sessions are
 *   bounded (the least recently used one is closed to make room), closed after an idle time, and
 *   closed by the client's `DELETE`;
 * - a `tools/call` that carries no session (2026-07-28, and 2025 clients that do not keep the session)
 *   is answered directly: the request is checked, the tool is called and its result mapped by the
 *   same code the MCP server's handler uses (`callSourceTool`), and the result is sent as one JSON
 *   body. Anything the direct path does not recognise exactly (progress tokens, log levels, other
 *   `_meta` keys, a header that disagrees with the body, malformed JSON-RPC) goes to the SDK, which
 *   answers it or its error;
 * - everything else goes to the SDK's handler as before: modern requests and the stateless 2025
 *   fallback, each on a server built for the request.
 *
 * Every tool answer fits the result budget (`createResultPages`); past it, its cursor is bound to the
 * credential that got it (the bearer token presented), not to a session: a client that opens a new
 * session per call (MCP Inspector's CLI) reads every page, and another credential reads none. A cursor
 * expires some time after its last read, whatever happens to the session (ADR 0262).
 */
import { createHash, randomUUID } from "node:crypto";
import {
  type CallToolResult,
  createMcpHandler,
  isCallToolResult,
  isJsonContentType,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import type { Logger } from "@tackle/core";
import { createResultPages } from "@tackle/core/mcp";
import type { ApprovalCalls } from "../mcp/approval-calls.ts";
import { callSourceTool, createMcpServer, serverIdentity } from "../mcp/create-mcp-server.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { toolCallBodyBytes } from "./body-limits.ts";
import {
  type DirectCall,
  directCall,
  hasModernClaim,
  isRecord,
  legacyRevisions,
  modernRevision,
  project,
} from "./mcp-direct-call.ts";
import { type ConsoleBounds, type Place, type PlaceKind, refusedMcp } from "./request-bounds.ts";
import { createSessionEventStore } from "./session-event-store.ts";
import { createSessionPins, type SessionPins } from "./session-pins.ts";

export interface McpSessionOptions {
  /** Sessions held at once; a new one past this closes the least recently used. Default 64. */
  readonly max?: number;
  /**
   * A session unused this long is closed: no request since, and none of its calls still running or
   * answered since. Default 30 minutes.
   */
  readonly idleMs?: number;
}

export interface McpEndpointOptions extends McpSessionOptions {
  /** Tokens of one tool answer. Default 8,000. */
  readonly resultBudget?: number;
  /** Tool calls that wait for a person's approval (asked through elicitation where the client can). */
  readonly approvals?: ApprovalCalls;
}

/**
 * Whose cursors a request's answers make and may read: its credential, the bearer token it presented
 * (hashed, so the token is not kept in the pages' keys), or `anonymous` for a request with none (only
 * reachable where no guard stands in front, as in tests).
 */
export function credentialOwner(headers: Headers | undefined): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers?.get("authorization") ?? "");
  if (match === null) return "anonymous";
  return `credential:${createHash("sha256")
    .update(match[1] as string)
    .digest("base64url")}`;
}

export interface McpEndpoint {
  /**
   * Answers one request. `held`: the place it holds and the bounds it came from; once a POST's body is
   * read its place is a stream's if it is a `subscriptions/listen`, a request's otherwise, moved there
   * or refused 429 when those are all held (ADR 0270).
   */
  fetch(
    request: Request,
    held?: { readonly place: Place; readonly bounds: ConsoleBounds },
  ): Promise<Response>;
  /** Sessions held now (for tests and logs). */
  readonly sessionCount: number;
  close(): Promise<void>;
}

/** The bound on a POST body (ADR 0271): the SDK is handed it, and the direct path keeps it too. */
const maxBodyBytes = toolCallBodyBytes;
const serverInfoKey = "io.modelcontextprotocol/serverInfo";
/** The reconnect delay a session's streams suggest to a client that lost one. */
const streamRetryMs = 1_000;

interface Session {
  readonly server: Server;
  /** The 2025 revision its initialize settled on (the client asked for it, and it is served). */
  readonly revision: string | undefined;
  readonly transport: WebStandardStreamableHTTPServerTransport;
  /** The places its calls hold until they are answered, whatever became of their streams. */
  readonly pins: SessionPins;
  lastUsed: number;
}

export function createMcpEndpoint(
  source: ToolSource,
  logger: Logger,
  options: McpEndpointOptions = {},
): McpEndpoint {
  const maxSessions = options.max ?? 64;
  const idleMs = options.idleMs ?? 30 * 60_000;
  const onerror = (error: Error) => logger.warn("console request failed", { error: error.message });
  const pages = createResultPages(options.resultBudget === undefined ? {} : { budget: options.resultBudget });
  const approvals = options.approvals;
  const handler = createMcpHandler(
    (context) =>
      createMcpServer(source, {
        resultPages: pages,
        owner: credentialOwner(context.requestInfo?.headers),
        ...(approvals === undefined ? {} : { approvals }),
      }),
    { onerror, maxRequestBodySize: maxBodyBytes },
  );
  const identity = serverIdentity();
  const sessions = new Map<string, Session>();

  const serving: Serving = { source, pages, approvals, onerror, identity };
  const table: SessionTable = { sessions, maxSessions, closeSession };
  const openSession = (request: Request, parsedBody: unknown) =>
    openSessionIn(serving, table, request, parsedBody);
  const answerDirect = (call: DirectCall, request: Request) => answerDirectIn(serving, call, request);

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, session] of sessions) {
        // A call still running is use: its answer is sent on the session (ADR 0278).
        if (session.pins.pending > 0) continue;
        if (now - session.lastUsed >= idleMs) void closeSession(id, session, "idle");
      }
    },
    Math.max(250, Math.min(60_000, Math.floor(idleMs / 4))),
  );
  sweep.unref();

  async function closeSession(id: string, session: Session, why: string): Promise<void> {
    if (sessions.get(id) !== session) return;
    sessions.delete(id);
    logger.debug("MCP session closed", { session: id, why });
    await session.server.close().catch(() => undefined);
  }

  async function sessionRequest(
    id: string,
    request: Request,
    parsedBody?: unknown,
    place?: Place,
  ): Promise<Response> {
    const session = sessions.get(id);
    if (session === undefined) return jsonRpcError(404, -32001, "Session not found");
    if (place !== undefined && parsedBody !== undefined) session.pins.posted(parsedBody, place);
    session.lastUsed = Date.now();
    sessions.delete(id);
    sessions.set(id, session);
    const settled = atSessionRevision(request, session.revision, parsedBody !== undefined);
    return session.transport.handleRequest(settled, parsedBody === undefined ? {} : { parsedBody });
  }

  return {
    get sessionCount() {
      return sessions.size;
    },
    async fetch(request, held) {
      const sessionId = request.headers.get("mcp-session-id");
      if (request.method !== "POST") {
        return sessionId === null ? handler.fetch(request) : sessionRequest(sessionId, request);
      }
      const body = await readJson(request);
      // The client went before its body was whole: answered as the SDK answers it (it is gone anyway).
      if (body.kind === "unreadable")
        return jsonRpcError(400, -32700, "Parse error: the request body could not be read");
      // What the body is decides its place, whatever its `Mcp-Method` header said (ADR 0270).
      if (held !== undefined) {
        const kind = placeFor(body, held.place.kind);
        if (!held.place.moveTo(kind)) return refusedMcp(held.bounds, held.place.credential, kind);
      }
      if (body.kind === "unread") {
        return sessionId === null ? handler.fetch(request) : sessionRequest(sessionId, request);
      }
      if (body.kind === "not-json") {
        // The SDK answers a body that is not JSON; it gets the bytes back as they came.
        const again = new Request(request.url, {
          method: request.method,
          headers: request.headers,
          body: body.text,
        });
        return sessionId === null ? handler.fetch(again) : sessionRequest(sessionId, again);
      }
      const parsed = body.value;
      if (sessionId !== null) return sessionRequest(sessionId, request, parsed, held?.place);
      if (isRecord(parsed) && parsed.method === "initialize" && !hasModernClaim(parsed)) {
        return openSession(request, parsed);
      }
      const direct = directCall(request.headers, parsed);
      if (direct !== undefined) return answerDirect(direct, request);
      return handler.fetch(request, { parsedBody: parsed });
    },
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions].map(([id, session]) => closeSession(id, session, "console closed")));
      await handler.close();
    },
  };
}

/** What every session and direct call is served from. */
interface Serving {
  readonly source: ToolSource;
  readonly pages: ReturnType<typeof createResultPages>;
  readonly approvals: McpEndpointOptions["approvals"];
  readonly onerror: (error: Error) => void;
  readonly identity: ReturnType<typeof serverIdentity>;
}

/** The open sessions, least recently used first, and how one is closed. */
interface SessionTable {
  readonly sessions: Map<string, Session>;
  readonly maxSessions: number;
  closeSession(id: string, session: Session, why: string): Promise<void>;
}

async function openSessionIn(
  { source, pages, approvals, onerror }: Serving,
  { sessions, maxSessions, closeSession }: SessionTable,
  request: Request,
  parsedBody: unknown,
): Promise<Response> {
  const server = createMcpServer(source, {
    resultPages: pages,
    owner: credentialOwner(request.headers),
    ...(approvals === undefined ? {} : { approvals }),
  });
  let registered: Session | undefined;
  const pins = createSessionPins();
  const asked =
    isRecord(parsedBody) && isRecord(parsedBody.params) ? parsedBody.params.protocolVersion : undefined;
  const revision = typeof asked === "string" && legacyRevisions.has(asked) ? asked : undefined;
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    // Resumable streams (SEP-1699): each starts with a priming event and a retry hint, and a client
    // that lost one reads the rest with Last-Event-ID.
    eventStore: createSessionEventStore(),
    retryInterval: streamRetryMs,
    maxRequestBodySize: maxBodyBytes,
    onsessioninitialized: (id) => {
      // Room for this one: the least recently used session goes (Map order is insertion order,
      // and a used session is moved to the end), one with no call running first (ADR 0279).
      while (sessions.size >= maxSessions) {
        const [oldestId, oldest] = leastRecentlyUsed(sessions);
        void closeSession(oldestId, oldest, "too many sessions");
      }
      registered = { server, revision, transport, pins, lastUsed: Date.now() };
      sessions.set(id, registered);
    },
    onsessionclosed: (id) => {
      // The client's DELETE: the transport closes itself after this returns.
      if (sessions.get(id)?.transport === transport) sessions.delete(id);
    },
  });
  // Every answer the session's server sends unpins its call's place; a closed session unpins them all.
  const send = transport.send.bind(transport);
  transport.send = (message, sendOptions) => {
    pins.sent(message);
    // An answer is use: the session's idle time counts from its last call's end (ADR 0278), and it is
    // the most recently used (ADR 0279).
    if (registered !== undefined && "id" in message && !("method" in message)) {
      registered.lastUsed = Date.now();
      const id = transport.sessionId;
      if (id !== undefined && sessions.get(id) === registered) {
        sessions.delete(id);
        sessions.set(id, registered);
      }
    }
    return send(message, sendOptions);
  };
  server.onclose = () => {
    pins.clear();
    const id = transport.sessionId;
    if (id !== undefined && sessions.get(id)?.transport === transport) sessions.delete(id);
  };
  transport.onerror = onerror;
  await server.connect(transport);
  const response = await transport.handleRequest(request, { parsedBody });
  // A refused initialize (a bad body) made no session: nothing is kept.
  if (registered === undefined) await server.close().catch(() => undefined);
  return response;
}

/**
 * The session a full table closes: the least recently used with no call running, so no running call
 * loses its answer while an idle session could go instead; the least recently used when every one has
 * a call running (the bound holds).
 */
function leastRecentlyUsed(sessions: ReadonlyMap<string, Session>): [string, Session] {
  for (const entry of sessions) if (entry[1].pins.pending === 0) return entry;
  return sessions.entries().next().value as [string, Session];
}

async function answerDirectIn(
  { source, pages, approvals, onerror, identity }: Serving,
  call: DirectCall,
  request: Request,
): Promise<Response> {
  let result: CallToolResult;
  try {
    result = await callSourceTool(
      source,
      call.name,
      call.args,
      { signal: request.signal },
      { pages, owner: credentialOwner(request.headers), unbudgeted: call.unbudgeted, approvals },
    );
  } catch (error) {
    onerror(error as Error);
    return jsonRpcError(200, -32603, `Internal error: ${(error as Error).message}`, call.id);
  }
  // Content blocks a tool made itself are checked as the SDK checks a handler's result.
  if (result.content.some((block) => block.type !== "text") && !isCallToolResult(result)) {
    onerror(new Error(`"${call.name}" returned content that is not a valid tools/call result`));
    return jsonRpcError(
      200,
      -32603,
      `Internal error: "${call.name}" returned an invalid tools/call result`,
      call.id,
    );
  }
  const projected = project(result, call.revision);
  const payload =
    call.revision === modernRevision
      ? { ...projected, resultType: "complete", _meta: { ...projected._meta, [serverInfoKey]: identity } }
      : projected;
  return new Response(JSON.stringify({ result: payload, jsonrpc: "2.0", id: call.id }), {
    status: 200,
    headers: { "content-type": "application/json" },
  });
}

/**
 * The request as the session's streams should treat it: a 2025 header naming an older revision than
 * the one its initialize settled on is read as that one (the SDK primes a resumable stream only for a
 * revision that allows an empty event, and the session's revision is what both sides agreed).
 */
function atSessionRevision(request: Request, revision: string | undefined, bodyRead: boolean): Request {
  const header = request.headers.get("mcp-protocol-version");
  if (revision === undefined || header === null || !legacyRevisions.has(header) || header >= revision)
    return request;
  const headers = new Headers(request.headers);
  headers.set("mcp-protocol-version", revision);
  return new Request(request.url, {
    method: request.method,
    headers,
    signal: request.signal,
    ...(bodyRead || request.body === null ? {} : { body: request.body, duplex: "half" }),
  } as RequestInit);
}

type Body =
  | { readonly kind: "json"; readonly value: unknown }
  | { readonly kind: "not-json"; readonly text: string }
  /** Not read: no declared length, over the bound, or not JSON by its type; the SDK reads it. */
  | { readonly kind: "unread" }
  /** Its reading failed: the client went mid-body. */
  | { readonly kind: "unreadable" };

/**
 * The place a POST's body holds: a listen, a stream's (a call cannot pass for one); a notification or
 * a response read in a reply place, that place (it runs nothing); anything else, a body not read here
 * included, a request's.
 */
function placeFor(body: Body, current: PlaceKind): PlaceKind {
  const message = body.kind === "json" && isRecord(body.value) ? body.value : undefined;
  if (message?.method === "subscriptions/listen") return "stream";
  if (current !== "reply" || message === undefined) return "request";
  const notification = typeof message.method === "string" && !("id" in message);
  const response = !("method" in message) && "id" in message && ("result" in message || "error" in message);
  return notification || response ? "reply" : "request";
}

async function readJson(request: Request): Promise<Body> {
  const length = Number(request.headers.get("content-length") ?? Number.NaN);
  if (!(length >= 0 && length <= maxBodyBytes) || !isJsonContentType(request.headers.get("content-type"))) {
    return { kind: "unread" };
  }
  let text: string;
  try {
    text = await request.text();
  } catch {
    return { kind: "unreadable" };
  }
  try {
    return { kind: "json", value: JSON.parse(text) };
  } catch {
    return { kind: "not-json", text };
  }
}

function jsonRpcError(status: number, code: number, message: string, id: string | number | null = null) {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id }, { status });
}
