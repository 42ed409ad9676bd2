/**
 * Where the runs page's durable runs live: the demo agent's runner in the console process, or another
 * process's durable HTTP server (`tackle serve --durable-url`, e.g. the video assistant's driver). Either
 * way the page speaks durable's own HTTP API under `/api/durable` (AG-UI events, resumes, cancel,
 * history), and `GET /api/runs` lists the threads with their state and pending approvals.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "@tackle/core";
import { createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { createDurableApp } from "@tackle/durable/http";
import type { Context, Hono } from "hono";
import { createDemoGraph, demoGraphName } from "./demo-agent.ts";

/** One thread as the runs table shows it. */
export interface RunRow {
  readonly threadId: string;
  readonly graph: string;
  readonly status: string;
  readonly runId?: string;
  readonly startedAt: string;
  readonly state: Record<string, unknown>;
  readonly interrupts: readonly unknown[];
}

export interface RunsBackend {
  /** What the page says of the runs: the demo's, or the durable server's at `url`. */
  readonly source: { readonly kind: "demo" } | { readonly kind: "remote"; readonly url: string };
  list(): Promise<RunRow[]>;
  /** Starts the demo agent; undefined for a remote server (its runs are started by its own clients). */
  readonly startDemo?: (orderId: string) => Promise<{ threadId: string; runId: string }>;
  /** Mounts durable's HTTP API at `/api/durable` of `app`. */
  mount(app: Hono): void;
  close(): Promise<void>;
}

const newestFirst = (a: RunRow, b: RunRow) =>
  b.startedAt.localeCompare(a.startedAt) || b.threadId.localeCompare(a.threadId);

/** The demo agent's runner, in this process (its runs in SQLite at `runsStore`, or in memory). */
export function demoRuns(runsStore: string | undefined, logger: Logger): RunsBackend {
  const runner: Runner = createRunner({
    // No file given (a console started from code, a test): the demo runs stay in memory rather than in
    // the durable default `.tackle/durable.sqlite` under whatever the working directory is.
    store: runsStore ?? createMemoryStore(),
    graphs: [createDemoGraph()],
    logger,
  });
  return {
    source: { kind: "demo" },
    async list() {
      const threads = await runner.threads({ limit: 100 });
      const rows = await Promise.all(
        threads.map(async (thread): Promise<RunRow> => {
          const run = await runner.get(thread.threadId);
          return {
            threadId: thread.threadId,
            graph: thread.graph,
            status: thread.status,
            ...(thread.runId === undefined ? {} : { runId: thread.runId }),
            startedAt: thread.createdAt,
            state: (run?.state ?? {}) as Record<string, unknown>,
            interrupts: run?.interrupts ?? [],
          };
        }),
      );
      return rows.sort(newestFirst);
    },
    async startDemo(orderId) {
      const threadId = `demo-${randomUUID().slice(0, 8)}`;
      const launched = await runner.launch(demoGraphName, { orderId }, { threadId });
      launched.finished.catch((error: Error) =>
        logger.warn("demo run failed", { threadId, error: error.message }),
      );
      return { threadId, runId: launched.runId };
    },
    mount(app) {
      app.route("/api/durable", createDurableApp({ runner }));
    },
    close: () => runner.close(),
  };
}

/** Request headers the page's durable requests carry on to the server; nothing else (no cookie). */
const forwardedRequest = ["content-type", "accept", "last-event-id"];
const forwardedResponse = ["content-type", "cache-control"];

/** Another process's durable HTTP server at `baseUrl`: listed through it, its API passed through. */
export function remoteRuns(baseUrl: string, logger: Logger): RunsBackend {
  const base = baseUrl.replace(/\/+$/, "");
  const read = async (path: string): Promise<Record<string, unknown>> => {
    const response = await fetch(`${base}${path}`, { headers: { accept: "application/json" } });
    if (!response.ok) throw new Error(`${base}${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as Record<string, unknown>;
  };
  const pass = async (c: Context) => {
    const path = c.req.path.slice("/api/durable".length) || "/";
    const search = new URL(c.req.url).search;
    const headers = new Headers();
    for (const name of forwardedRequest) {
      const value = c.req.header(name);
      if (value !== undefined) headers.set(name, value);
    }
    const method = c.req.method;
    try {
      const response = await fetch(`${base}${path}${search}`, {
        method,
        headers,
        signal: c.req.raw.signal,
        ...(method === "GET" || method === "HEAD" ? {} : { body: await c.req.arrayBuffer() }),
      });
      const answered = new Headers();
      for (const name of forwardedResponse) {
        const value = response.headers.get(name);
        if (value !== null) answered.set(name, value);
      }
      return new Response(response.body, { status: response.status, headers: answered });
    } catch (error) {
      logger.warn("console could not reach the durable server", {
        url: base,
        error: (error as Error).message,
      });
      return c.json(
        {
          error: {
            code: "durable_unreachable",
            message: `The durable server at ${base} did not answer: ${(error as Error).message}`,
          },
        },
        502,
      );
    }
  };
  return {
    source: { kind: "remote", url: base },
    async list() {
      const { threads } = (await read("/threads?limit=100")) as { threads: Record<string, unknown>[] };
      const rows = await Promise.all(
        threads.map(async (thread): Promise<RunRow> => {
          const threadId = String(thread.threadId);
          const run = await read(`/runs/${encodeURIComponent(threadId)}`).catch(() => undefined);
          return {
            threadId,
            graph: String(thread.graph ?? run?.graph ?? ""),
            status: String(run?.status ?? thread.status ?? ""),
            ...(typeof thread.runId === "string" ? { runId: thread.runId } : {}),
            startedAt: String(thread.createdAt ?? ""),
            state: (run?.state ?? {}) as Record<string, unknown>,
            interrupts: (run?.interrupts ?? []) as unknown[],
          };
        }),
      );
      return rows.sort(newestFirst);
    },
    mount(app) {
      app.all("/api/durable/*", pass);
    },
    close: async () => {},
  };
}
