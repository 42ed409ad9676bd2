/** The HTTP face of a runner (Hono): start a run, stream its frames as SSE resumable by Last-Event-ID, resume it. */
import { randomUUID } from "node:crypto";
import { ToolError } from "@tackle/core";
import { loopbackViolation } from "@tackle/core/internal";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { streamSSE } from "hono/streaming";
import { DurableError } from "../errors/durable-error.ts";
import type { Runner } from "../runner/create-runner.ts";
import { parseAgUiEventId } from "./ag-ui.ts";
import { type AgUiRunInput, agUiRoutes } from "./ag-ui-routes.ts";
import { defaultMaxDrivingRuns, limitDrivingRuns } from "./drive-limit.ts";
import { defaultMaxHistoryBytes, registerHistoryRoutes } from "./history-routes.ts";
import { defaultMaxOpenRuns, limitOpenRuns } from "./open-limit.ts";
import { invalid, readJson, tooLargeBody } from "./request.ts";
import { defaultMaxInFlight, defaultMaxStreams, keepStreamPlace, limitRequests } from "./request-limit.ts";
import { registerThreadRoutes } from "./thread-routes.ts";

export type { AgUiRunInput } from "./ag-ui-routes.ts";

export interface DurableAppOptions {
  readonly runner: Runner;
  /** Largest request body, in bytes (past it 413 `payload_too_large` naming it, `data.maxBytes`). Default 1 MiB. */
  readonly maxBodyBytes?: number;
  /** SSE keep-alive comment interval. Default 15 s. */
  readonly keepAliveMs?: number;
  /**
   * Who is calling: return the tenant (`[A-Za-z0-9_.-]+`), or undefined to answer 401. Each tenant sees
   * only its own threads (stored as `<tenant>/<threadId>`). Without it the API is single-tenant.
   */
  readonly authenticate?: (request: Request) => string | undefined | Promise<string | undefined>;
  /**
   * Answer only requests whose `Host` and `Origin` are loopback (403 otherwise), so no web page and no
   * DNS-rebinding name can start or approve runs. Default true; turn it off only behind your own proxy
   * and `authenticate`.
   */
  readonly loopbackOnly?: boolean;
  /**
   * The graph input of a new AG-UI run, from the client's `RunAgentInput`. Default: its `state`
   * (an object), with `messages` added when the state has none.
   */
  readonly agUiInput?: (input: AgUiRunInput) => object;
  /**
   * Runs one tenant may have driving at once through this API (default 64): past it a start or resume
   * is refused `too_many_runs` (429, retryable) before anything is stored. A paused run holds no place.
   */
  readonly maxDrivingRuns?: number;
  /**
   * Runs one tenant may hold open — running or paused, an approval waiting among them — at once (default
   * 10,000): past it a start or fork is refused `too_many_open_runs` (409, not retryable) before anything
   * is stored; a run frees its place when it completes, fails or is cancelled, its approval answered or
   * expired. Counted by the store, atomically across processes sharing it (ADR 0123). `Infinity` turns it off.
   */
  readonly maxOpenRuns?: number;
  /**
   * Requests one tenant may have in flight at once (default 64), event streams apart: past it 429
   * `too_many_requests` (retryable, `Retry-After: 1`) before the body is read, so a tenant trickling many
   * bodies in holds at most this many on the server. A place is freed when its request is answered,
   * fails, or its client goes.
   */
  readonly maxInFlight?: number;
  /**
   * Event streams one tenant may have open at once (default 128: `GET /runs/:id/frames`, the AG-UI
   * streams), counted apart from `maxInFlight` so a stream waiting on a run neither starves nor is
   * starved by requests; past it 429 `too_many_requests` with `Retry-After: 1`. Freed when the stream ends.
   */
  readonly maxStreams?: number;
  /**
   * Bytes of checkpoints one `GET /runs/:id/history` page answers (default 8 MiB): every checkpoint
   * carries the run's whole state, so a page ends early once its checkpoints' JSON passes this (one
   * checkpoint always goes) and `nextAfterSeq` names where the next page starts (ADR 0122).
   */
  readonly maxHistoryBytes?: number;
}

const threadIdPattern = /^[A-Za-z0-9_.:-]{1,128}$/;
const tenantPattern = /^[A-Za-z0-9_.-]{1,64}$/;

const statusOfCode: Record<string, 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 503> = {
  forbidden_host: 403,
  unsupported_media_type: 415,
  not_found: 404,
  unknown_graph: 404,
  unauthenticated: 401,
  thread_exists: 409,
  run_active: 409,
  run_not_paused: 409,
  answer_conflict: 409,
  unanswered_interrupts: 400,
  unknown_interrupt: 400,
  not_serializable: 400,
  invalid_request: 400,
  payload_too_large: 413,
  state_too_large: 413,
  invalid_edit: 400,
  approval_expired: 409,
  run_cancelled: 409,
  thread_active: 409,
  run_not_active: 409,
  too_many_runs: 429,
  too_many_open_runs: 409,
  too_many_requests: 429,
  unavailable: 503,
};

/**
 * Routes: `POST /runs` `{ graph, input, threadId?, runId? }` → 201 `{ threadId, runId }` (with both
 * ids, a start sent again answers the run it started);
 * `GET /runs/:threadId` → the run; `GET /runs/:threadId/frames[?afterSeq=&format=ag-ui]` → SSE;
 * `POST /runs/:threadId/resume` `{ answers }` → 202 `{ threadId, runId }` (`?recover=true` with no
 * answers takes over a run whose process died); `GET /runs/:threadId/history` and
 * `POST /runs/:threadId/fork` (history-routes.ts).
 */
export function createDurableApp(options: DurableAppOptions): Hono {
  // Threads are stored as `<tenant>/<thread>` when there are tenants; one bucket when there are none.
  const tenantOf = (threadId: string) =>
    options.authenticate === undefined ? "" : threadId.slice(0, Math.max(0, threadId.indexOf("/")));
  const open = limitOpenRuns(options.runner, options.maxOpenRuns ?? defaultMaxOpenRuns, (threadId) => {
    const tenant = tenantOf(threadId);
    return tenant === "" ? "" : `${tenant}/`;
  });
  const runner = limitDrivingRuns(open, options.maxDrivingRuns ?? defaultMaxDrivingRuns, tenantOf);
  const app = new Hono();
  guard(app, options);
  const scoped = (c: { get(key: never): unknown }, threadId: string) => {
    if (!threadIdPattern.test(threadId)) throw invalid(`Thread ids match ${threadIdPattern}`);
    const tenant = c.get("tenant" as never) as string | undefined;
    return tenant === undefined ? threadId : `${tenant}/${threadId}`;
  };
  const agUi = agUiRoutes({
    runner,
    scoped: scoped as never,
    ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
    ...(options.agUiInput === undefined ? {} : { agUiInput: options.agUiInput }),
  });
  const unscoped = (threadId: string) =>
    options.authenticate === undefined ? threadId : threadId.slice(threadId.indexOf("/") + 1);

  registerRunRoutes(app, { runner, scoped, unscoped, agUi, keepAliveMs: options.keepAliveMs ?? 15_000 });
  registerThreadRoutes(app, { runner, scoped });
  registerHistoryRoutes(app, {
    runner,
    scoped,
    unscoped,
    idPattern: threadIdPattern,
    maxHistoryBytes: options.maxHistoryBytes ?? defaultMaxHistoryBytes,
  });
  agUi.register(app);
  return app;
}

/**
 * The loopback check, the tenant, the bounds on requests in flight and the body limit, before any
 * route; coded errors as JSON after.
 */
function guard(app: Hono, options: DurableAppOptions): void {
  // A browser page (cross-site, or through a rebound DNS name) must not reach the runs: a forged
  // resume would approve a paused tool call.
  app.use("*", async (c, next) => {
    if (options.loopbackOnly === false) return next();
    const violation = loopbackViolation(c.req.raw.headers);
    if (violation !== undefined) throw new DurableError("forbidden_host", violation);
    return next();
  });

  // Every route knows its tenant before it touches a run.
  app.use("*", async (c, next) => {
    if (options.authenticate === undefined) return next();
    const tenant = await options.authenticate(c.req.raw);
    if (tenant === undefined) throw new DurableError("unauthenticated", "Missing or unknown credentials");
    if (!tenantPattern.test(tenant)) throw new DurableError("invalid_request", "The tenant id is malformed");
    c.set("tenant" as never, tenant as never);
    return next();
  });

  // How many of the tenant's requests and streams are in flight, before any body is read: the body
  // limit comes after, since it reads a chunked body whole before the route does.
  limitRequests(app, {
    maxInFlight: options.maxInFlight ?? defaultMaxInFlight,
    maxStreams: options.maxStreams ?? defaultMaxStreams,
  });
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  app.use("*", bodyLimit({ maxSize: maxBodyBytes, onError: (c) => c.json(tooLargeBody(maxBodyBytes), 413) }));
  app.onError((error, c) => {
    if (ToolError.isInstance(error)) {
      // The runner names threads by their storage key, `<tenant>/<thread>`; the caller knows only its
      // own thread ids, so the key's tenant part is taken out of what it is told.
      const tenant = c.get("tenant" as never) as string | undefined;
      const payload =
        tenant === undefined
          ? error.toJSON()
          : JSON.parse(JSON.stringify(error.toJSON()).split(`${tenant}/`).join(""));
      const retryAfter = (error.data as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds;
      return c.json(
        { error: payload },
        statusOfCode[error.code] ?? 500,
        typeof retryAfter === "number" ? { "retry-after": String(retryAfter) } : {},
      );
    }
    // Never a stack over the wire; not retryable: what failed may have run, and the client sends again
    // only what was refused before anything ran (429).
    return c.json({ error: { code: "internal", message: "Internal error", retryable: false } }, 500);
  });
}

interface RunRoutesContext {
  readonly runner: Runner;
  readonly scoped: (c: { get(key: never): unknown }, threadId: string) => string;
  readonly unscoped: (threadId: string) => string;
  readonly agUi: ReturnType<typeof agUiRoutes>;
  readonly keepAliveMs: number;
}

/** Start a run, read it, resume it, and stream its frames. */
function registerRunRoutes(
  app: Hono,
  { runner, scoped, unscoped, agUi, keepAliveMs }: RunRoutesContext,
): void {
  app.post("/runs", async (c) => {
    const body = await readJson(c.req.raw);
    if (typeof body.graph !== "string") throw invalid("`graph` (a graph name) is required");
    if (body.threadId !== undefined && typeof body.threadId !== "string")
      throw invalid("`threadId` is a string");
    if (body.runId !== undefined && (typeof body.runId !== "string" || !threadIdPattern.test(body.runId)))
      throw invalid(`\`runId\` matches ${threadIdPattern}`);
    const threadId = scoped(c, typeof body.threadId === "string" ? body.threadId : randomUUID());
    const launched = await runner.launch(body.graph, (body.input ?? {}) as object, {
      threadId,
      ...(typeof body.runId === "string" ? { runId: body.runId } : {}),
    });
    launched.finished.catch(() => {});
    return c.json({ threadId: unscoped(launched.threadId), runId: launched.runId }, 201);
  });

  app.get("/runs/:threadId", async (c) => {
    const run = await runner.get(scoped(c, c.req.param("threadId")));
    if (run === undefined)
      throw DurableError.notFound(
        "run",
        c.req.param("threadId"),
        `No run for thread "${c.req.param("threadId")}"`,
      );
    const shown = { ...run, threadId: c.req.param("threadId") };
    return c.json(
      JSON.parse(
        JSON.stringify(shown, (_key, value) => (typeof value === "bigint" ? value.toString() : value)),
      ),
    );
  });

  app.post("/runs/:threadId/resume", async (c) => {
    const body = await readJson(c.req.raw);
    const answers = body.answers ?? {};
    if (typeof answers !== "object" || answers === null || Array.isArray(answers)) {
      throw invalid("`answers` is an object keyed by interrupt id");
    }
    // No answers means "take over a run left running"; over HTTP that must be asked for by name, since
    // another instance may still be driving the run (ADR 0102).
    if (Object.keys(answers).length === 0 && c.req.query("recover") !== "true") {
      throw invalid(
        "`answers` is required; to take over a run whose process died, POST …/resume?recover=true",
      );
    }
    const launched = await runner.launchResume(
      scoped(c, c.req.param("threadId")),
      answers as Record<string, unknown>,
    );
    launched.finished.catch(() => {});
    return c.json({ threadId: c.req.param("threadId"), runId: launched.runId }, 202);
  });

  app.get("/runs/:threadId/frames", async (c) => {
    const threadId = scoped(c, c.req.param("threadId"));
    const run = await runner.get(threadId);
    if (run === undefined)
      throw DurableError.notFound(
        "run",
        c.req.param("threadId"),
        `No run for thread "${c.req.param("threadId")}"`,
      );
    const lastEventId = c.req.header("last-event-id") ?? c.req.query("afterSeq") ?? "0";
    const afterSeq = Number.parseInt(lastEventId, 10);
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0)
      throw invalid("Last-Event-ID / afterSeq is a frame seq");
    // The AG-UI form of the same log: ids `<seq>.<index>`, one translator over the whole thread.
    if (c.req.query("format") === "ag-ui") {
      const after = parseAgUiEventId(lastEventId);
      if (after === undefined) throw invalid("Last-Event-ID is an AG-UI event id (<seq>.<index>)");
      return agUi.stream(c, threadId, c.req.param("threadId"), after, undefined);
    }
    const freeStreamPlace = keepStreamPlace(c);
    return streamSSE(c, async (stream) => {
      const aborted = new AbortController();
      stream.onAbort(() => aborted.abort());
      const keepAlive = setInterval(() => {
        stream.write(": keep-alive\n\n").catch(() => aborted.abort());
      }, keepAliveMs);
      try {
        for await (const frame of runner.watch(threadId, { afterSeq, signal: aborted.signal })) {
          await stream.writeSSE({ id: String(frame.seq), event: frame.type, data: JSON.stringify(frame) });
        }
      } finally {
        clearInterval(keepAlive);
        freeStreamPlace();
      }
    });
  });
}
