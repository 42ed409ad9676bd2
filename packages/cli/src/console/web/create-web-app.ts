/**
 * The console's web page and its JSON API, next to MCP on the same loopback port: a static shell and
 * script (no CDN, every byte ships in this package), sign-in by a one-time code for an HttpOnly
 * SameSite=Strict cookie, live module status over SSE, tool calls made as an MCP client makes them
 * (`/api/call/stream`, the one call path of every page), and durable runs: the demo agent's, or another
 * durable server's (runs-backend.ts), its HTTP API (AG-UI stream included) under `/api/durable`.
 */
import type { Logger } from "@tackle/core";
import { loopbackViolation } from "@tackle/core/internal";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { streamSSE } from "hono/streaming";
import { withoutSeatTools } from "../../mcp/module-contributions.ts";
import type { ModuleInfo, ToolSource } from "../../tool-source/tool-source.ts";
import { limitBody, pageBodyBound, signInBound } from "../body-limits.ts";
import { bearerMatches } from "../console-token.ts";
import {
  type ConsoleBounds,
  type Credential,
  kindOf,
  refusedPage,
  refusedSignIn,
  servedInPlace,
} from "../request-bounds.ts";
import { callOverMcp } from "./call-over-mcp.ts";
import { type ConsoleSessions, sessionCookie } from "./console-sessions.ts";
import { demoRuns, type RunsBackend, remoteRuns } from "./runs-backend.ts";
import { createStatusFeed, type StatusFeed } from "./status-feed.ts";
import { readAsset, shellHtml } from "./web-assets.ts";

export interface WebAppOptions {
  readonly source: ToolSource;
  readonly token: string;
  readonly sessions: ConsoleSessions;
  /** The places each credential holds; the page's sessions share one credential's (ADR 0270). None: unbounded. */
  readonly bounds?: ConsoleBounds;
  readonly logger: Logger;
  /** Where the demo agent's runs live: a SQLite path; default in memory (lost at exit). */
  readonly runsStore?: string;
  /** Another process's durable HTTP server whose runs the runs page shows instead of the demo's. */
  readonly durableUrl?: string;
  /** How often module status is re-read for the live view. Default 2 s. */
  readonly statusIntervalMs?: number;
}

export interface WebApp {
  readonly app: Hono;
  close(): Promise<void>;
}

const maxCallTimeoutMs = 300_000;

export function createWebApp(options: WebAppOptions): WebApp {
  const { source, token, sessions, bounds, logger } = options;
  const runs: RunsBackend =
    options.durableUrl === undefined
      ? demoRuns(options.runsStore, logger)
      : remoteRuns(options.durableUrl, logger);
  const status = createStatusFeed(source, options.statusIntervalMs ?? 2000, logger);
  const app = new Hono();
  mountShell(app, logger);
  mountSession(app, { source, token, sessions, logger, ...(bounds === undefined ? {} : { bounds }) });
  mountModules(app, source, status);
  mountCalls(app, source);
  mountRuns(app, runs);
  runs.mount(app);
  return {
    app,
    async close() {
      status.close();
      await runs.close();
    },
  };
}

/** The page's shell and assets, behind the same-origin check every state-changing request passes. */
function mountShell(app: Hono, logger: Logger): void {
  // Every state-changing request must come from this console's own page: its Origin is this very origin.
  app.use("*", async (c, next) => {
    if (c.req.method === "GET" || c.req.method === "HEAD") return next();
    const problem = sameOriginProblem(c.req.raw.headers);
    if (problem !== undefined) {
      logger.warn("console refused a request", { reason: problem });
      return c.json({ error: { code: "forbidden", message: problem } }, 403);
    }
    return next();
  });

  const securityHeaders = {
    "content-security-policy":
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
  };

  app.get("/", (c) => c.html(shellHtml(), 200, securityHeaders));
  app.get("/assets/:name", (c) => {
    const asset = readAsset(c.req.param("name"));
    if (asset === undefined)
      return c.json(
        {
          error: { code: "not_found", message: "No such asset", data: { resource: "asset", id: c.req.path } },
        },
        404,
      );
    return c.body(asset.body, 200, {
      ...securityHeaders,
      "content-type": asset.type,
      "cache-control": "no-cache",
    });
  });
}

/**
 * Sign-in by a one-time code (or the console token) for a cookie; every other `/api` route needs one.
 * Every body is bounded (ADR 0271): sign-in's before its secret is checked, the others' once their
 * credential is known and its place taken. A sign-in, which has no credential yet, takes one of the
 * console's sign-in places before its body is read (ADR 0273).
 */
function mountSession(
  app: Hono,
  {
    source,
    token,
    sessions,
    bounds,
    logger,
  }: Pick<WebAppOptions, "source" | "token" | "sessions" | "bounds" | "logger">,
): void {
  app.post("/api/session", signInPlace(bounds), limitBody(signInBound), async (c) => {
    const body = await readBody(c);
    const secret =
      typeof body?.code === "string" ? body.code : typeof body?.token === "string" ? body.token : "";
    const id = sessions.redeem(secret);
    if (id === undefined) {
      logger.warn("console sign-in refused");
      return c.json(
        {
          error: {
            code: "sign_in_refused",
            message:
              "This sign-in code was already used or is wrong. Sign in with the console token instead (its file's path is printed by tackle serve).",
          },
        },
        401,
      );
    }
    setCookie(c, sessionCookie, id, { httpOnly: true, sameSite: "Strict", path: "/" });
    return c.json({ signedIn: true });
  });

  // Everything else under /api needs a session (or the bearer token, for scripts), and a place of its
  // credential's: every signed-in session shares the page's, a script the token's (ADR 0270).
  app.use("/api/*", async (c, next) => {
    const credential: Credential | undefined = sessions.valid(getCookie(c, sessionCookie))
      ? "page"
      : bearerMatches(c.req.header("authorization"), token)
        ? "token"
        : undefined;
    if (credential === undefined) {
      return c.json(
        {
          error: {
            code: "unauthorized",
            message: "Sign in first: open the sign-in URL tackle serve printed",
          },
        },
        401,
      );
    }
    if (bounds === undefined) return next();
    const request = c.req.raw;
    const place = bounds.take(credential, kindOf(request));
    if (place === undefined) return refusedPage(bounds, credential, kindOf(request));
    c.res = await servedInPlace(place, request, async () => {
      await next();
      return c.res;
    });
  });
  app.use(
    "/api/*",
    limitBody((c) => pageBodyBound(c.req.method, c.req.path)),
  );

  app.get("/api/session", (c) => c.json({ signedIn: true, source: source.description }));
  app.delete("/api/session", (c) => {
    sessions.end(getCookie(c, sessionCookie));
    setCookie(c, sessionCookie, "", { httpOnly: true, sameSite: "Strict", path: "/", maxAge: 0 });
    return c.json({ signedIn: false });
  });
}

/**
 * A sign-in's place, taken before its body is read: one of the console's few, since a sign-in has no
 * credential to count it against; past them 429 `overloaded` with `Retry-After` (ADR 0273).
 */
function signInPlace(bounds: ConsoleBounds | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (bounds === undefined) return next();
    const place = bounds.takeSignIn();
    if (place === undefined) return refusedSignIn();
    c.res = await servedInPlace(place, c.req.raw, async () => {
      await next();
      return c.res;
    });
  };
}

/** The modules' catalogue, read once or watched over SSE. */
function mountModules(app: Hono, source: ToolSource, status: StatusFeed): void {
  // `errors`: what is wrong with the source itself (the broker down), said once beside every module.
  // The `mcp` seat's verbs serve MCP's resources and prompts: no tool panel offers them.
  const listing = (modules: readonly ModuleInfo[]) => ({
    modules: withoutSeatTools(modules),
    errors: source.errors?.() ?? [],
  });
  app.get("/api/modules", async (c) => c.json(listing(await status.read())));

  app.get("/api/events", (c) =>
    streamSSE(c, async (stream) => {
      const aborted = new Promise<void>((resolve) => stream.onAbort(resolve));
      let last = "";
      const send = async (modules: readonly ModuleInfo[]) => {
        const text = JSON.stringify(listing(modules));
        if (text === last) return;
        last = text;
        await stream.writeSSE({ event: "modules", data: text });
      };
      const unsubscribe = status.subscribe((modules) => {
        send(modules).catch(() => {});
      });
      try {
        await send(await status.read());
        await aborted;
      } finally {
        unsubscribe();
      }
    }),
  );
}

function mountCalls(app: Hono, source: ToolSource): void {
  // The page's own calls: the call made as an MCP client makes it, each JSON-RPC message of its exchange
  // sent as an `rpc` event as it crosses (progress and log notifications included), then the `answer`.
  app.post("/api/call/stream", async (c) => {
    const body = await readBody(c);
    if (typeof body?.tool !== "string" || !/^[^.\s]+\.[^\s]+$/.test(body.tool)) {
      return c.json({ error: { code: "invalid_request", message: "`tool` is module.tool" } }, 400);
    }
    const tool = body.tool;
    const args =
      typeof body.args === "object" && body.args !== null && !Array.isArray(body.args)
        ? (body.args as Record<string, unknown>)
        : {};
    const signal = c.req.raw.signal;
    return streamSSE(c, async (stream) => {
      try {
        const answer = await callOverMcp(source, tool, args, {
          timeoutMs: maxCallTimeoutMs,
          signal,
          onMessage: (message) => {
            stream.writeSSE({ event: "rpc", data: JSON.stringify(message) }).catch(() => {});
          },
        });
        await stream.writeSSE({ event: "answer", data: JSON.stringify(answer) });
      } catch (error) {
        // The exchange itself failed (a timeout, the page gone): said as the call's error.
        const message = (error as Error).message;
        await stream
          .writeSSE({ event: "failure", data: JSON.stringify({ code: "call_failed", message }) })
          .catch(() => {});
      }
    });
  });
}

function mountRuns(app: Hono, runs: RunsBackend): void {
  // Every thread of the runs backend, newest first, with its state and pending approvals.
  app.get("/api/runs", async (c) => {
    const rows = await runs.list();
    const listed = rows.map((row) => ({
      ...row,
      orderId: typeof row.state.orderId === "string" ? row.state.orderId : "",
    }));
    return c.json(JSON.parse(JSON.stringify({ source: runs.source, runs: listed }, bigintAsString)));
  });

  app.post("/api/runs", async (c) => {
    if (runs.startDemo === undefined) {
      return c.json(
        {
          error: {
            code: "not_available",
            message: "This console shows another durable server's runs: start them with its own clients",
          },
        },
        409,
      );
    }
    const body = await readBody(c);
    const orderId =
      typeof body?.orderId === "string" && /^[A-Za-z0-9-]{1,40}$/.test(body.orderId)
        ? body.orderId
        : `ORD-${Math.floor(Math.random() * 9000 + 1000)}`;
    return c.json(await runs.startDemo(orderId), 201);
  });
}

function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}

async function readBody(c: Context): Promise<Record<string, unknown> | undefined> {
  if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) return undefined;
  try {
    const body = (await c.req.json()) as unknown;
    return typeof body === "object" && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A state-changing request must carry an Origin, and it must be this console's own (scheme, host and
 * port as addressed): a page on another loopback port is refused too.
 */
export function sameOriginProblem(headers: Headers): string | undefined {
  const violation = loopbackViolation(headers);
  if (violation !== undefined) return violation;
  const origin = headers.get("origin");
  if (origin === null) return "A state-changing request needs an Origin header (sent by every browser)";
  const host = headers.get("host") ?? "";
  if (origin !== `http://${host}`)
    return `Origin ${JSON.stringify(origin)} is not this console (http://${host})`;
  return undefined;
}
