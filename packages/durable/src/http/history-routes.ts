/**
 * A thread's history and time travel over HTTP (ADR 0113's `Runner.history` and `Runner.fork`):
 * `GET /runs/:threadId/history[?runId=]` → `{ checkpoints }`, oldest first;
 * `POST /runs/:threadId/fork` `{ seq, threadId?, runId?, input? }` → 201, the new thread's run once it
 * pauses or ends, as `Runner.fork` answers it.
 */
import { randomUUID } from "node:crypto";
import type { Hono } from "hono";
import type { Runner } from "../runner/create-runner.ts";
import { invalid, readJson } from "./request.ts";

type Scoped = (c: { get(key: never): unknown }, threadId: string) => string;

export interface HistoryRoutesOptions {
  readonly runner: Runner;
  /** The storage key of a caller's thread id (its tenant's prefix added); checks the id. */
  readonly scoped: Scoped;
  /** A storage key as its caller knows it (the tenant's prefix taken off). */
  readonly unscoped: (threadId: string) => string;
  readonly idPattern: RegExp;
}

export function registerHistoryRoutes(app: Hono, options: HistoryRoutesOptions): void {
  const { runner, scoped, unscoped, idPattern } = options;

  app.get("/runs/:threadId/history", async (c) => {
    const runId = c.req.query("runId");
    if (runId !== undefined && !idPattern.test(runId)) throw invalid(`\`runId\` matches ${idPattern}`);
    const checkpoints = await runner.history(
      scoped(c, c.req.param("threadId")),
      runId === undefined ? {} : { runId },
    );
    return c.json(toJson({ checkpoints }));
  });

  app.post("/runs/:threadId/fork", async (c) => {
    const body = await readJson(c.req.raw);
    if (typeof body.seq !== "number" || !Number.isSafeInteger(body.seq) || body.seq < 1)
      throw invalid("`seq` is the seq of a checkpoint the history answered");
    for (const name of ["threadId", "runId"] as const) {
      const value = body[name];
      if (value !== undefined && (typeof value !== "string" || !idPattern.test(value)))
        throw invalid(`\`${name}\` matches ${idPattern}`);
    }
    const input = body.input;
    if (input !== undefined && (typeof input !== "object" || input === null || Array.isArray(input)))
      throw invalid("`input` is an object merged over the checkpoint's state");
    const source = scoped(c, c.req.param("threadId"));
    const threadId = scoped(c, typeof body.threadId === "string" ? body.threadId : randomUUID());
    // The fork runs to its pause or end, as `Runner.fork` does; a dropped connection does not cancel it.
    const run = await runner.fork(source, {
      seq: body.seq,
      threadId,
      ...(typeof body.runId === "string" ? { runId: body.runId } : {}),
      ...(input === undefined ? {} : { input: input as Record<string, unknown> }),
    });
    return c.json(toJson({ ...run, threadId: unscoped(run.threadId) }), 201);
  });
}

function toJson(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_key, entry) => (typeof entry === "bigint" ? entry.toString() : entry)),
  );
}
