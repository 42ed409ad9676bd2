/**
 * Runs and threads over HTTP: `POST /runs/:threadId/cancel`, `GET /threads`, `GET
 * /threads/:threadId/runs`, a run's frames as a page, `DELETE /threads/:threadId` and `POST
 * /threads/prune` — each tenant only its own.
 */
import type { Hono } from "hono";
import { DurableError } from "../errors/durable-error.ts";
import type { Runner } from "../runner/create-runner.ts";
import { invalid, readJson } from "./request.ts";

export interface ThreadRoutesOptions {
  readonly runner: Runner;
  /** The storage key of a caller's thread id (its tenant's prefix added); checks the id. */
  readonly scoped: (c: { get(key: never): unknown }, threadId: string) => string;
}

export function registerThreadRoutes(app: Hono, { runner, scoped }: ThreadRoutesOptions): void {
  const tenantPrefix = (c: { get(key: never): unknown }) => {
    const tenant = c.get("tenant" as never) as string | undefined;
    return tenant === undefined ? "" : `${tenant}/`;
  };

  app.post("/runs/:threadId/cancel", async (c) => {
    const body = await readJson(c.req.raw);
    if (body.reason !== undefined && typeof body.reason !== "string") throw invalid("`reason` is a string");
    const run = await runner.cancel(scoped(c, c.req.param("threadId")), body.reason as string | undefined);
    return c.json(toJson({ ...run, threadId: c.req.param("threadId") }));
  });

  app.get("/threads", async (c) => {
    const limit = Number(c.req.query("limit") ?? 100);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw invalid("`limit` is 1 to 1000");
    const prefix = tenantPrefix(c);
    const after = c.req.query("after");
    const threads = await runner.threads({
      prefix,
      limit,
      ...(after === undefined ? {} : { after: `${prefix}${after}` }),
    });
    return c.json({
      threads: threads.map((thread) => ({ ...thread, threadId: thread.threadId.slice(prefix.length) })),
    });
  });

  app.get("/threads/:threadId/runs", async (c) => {
    return c.json({ runs: await runner.runs(scoped(c, c.req.param("threadId"))) });
  });

  app.get("/threads/:threadId/runs/:runId/frames", async (c) => {
    const afterSeq = Number(c.req.query("afterSeq") ?? 0);
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) throw invalid("`afterSeq` is a frame seq");
    const frames = await runner.frames(scoped(c, c.req.param("threadId")), {
      runId: c.req.param("runId"),
      afterSeq,
      limit: 1000,
    });
    return c.json({ frames });
  });

  app.delete("/threads/:threadId", async (c) => {
    const deleted = await runner.deleteThread(scoped(c, c.req.param("threadId")));
    if (!deleted)
      throw DurableError.notFound(
        "thread",
        c.req.param("threadId"),
        `No thread "${c.req.param("threadId")}"`,
      );
    return c.body(null, 204);
  });

  app.post("/threads/prune", async (c) => {
    const body = await readJson(c.req.raw);
    if (typeof body.olderThanMs !== "number") throw invalid("`olderThanMs` is a number of milliseconds");
    const prefix = tenantPrefix(c);
    const pruned = await runner.prune({ olderThanMs: body.olderThanMs, prefix });
    return c.json({ pruned: pruned.map((id) => id.slice(prefix.length)) });
  });
}

function toJson(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_key, entry) => (typeof entry === "bigint" ? entry.toString() : entry)),
  );
}
