/**
 * A thread's history and time travel over HTTP (ADR 0113's `Runner.history` and `Runner.fork`):
 * `GET /runs/:threadId/history[?runId=&afterSeq=&limit=]` → `{ checkpoints, nextAfterSeq? }`, oldest
 * first, a page at a time (ADR 0122);
 * `POST /runs/:threadId/fork` `{ seq, threadId?, runId?, input? }` → 201, the new thread's run once it
 * pauses or ends, as `Runner.fork` answers it.
 */
import { randomUUID } from "node:crypto";
import type { Hono } from "hono";
import type { Runner } from "../runner/create-runner.ts";
import { type Checkpoint, checkpointBytes } from "../runner/history.ts";
import { invalid, readJson } from "./request.ts";

type Scoped = (c: { get(key: never): unknown }, threadId: string) => string;

export interface HistoryRoutesOptions {
  readonly runner: Runner;
  /** The storage key of a caller's thread id (its tenant's prefix added); checks the id. */
  readonly scoped: Scoped;
  /** A storage key as its caller knows it (the tenant's prefix taken off). */
  readonly unscoped: (threadId: string) => string;
  readonly idPattern: RegExp;
  /** Bytes of checkpoints' JSON past which a history page ends (one checkpoint always goes). */
  readonly maxHistoryBytes: number;
}

/** Checkpoints a history page holds when the caller names no `limit`, and the most it may name. */
export const defaultHistoryLimit = 100;
const maxHistoryLimit = 1000;
/** Default `maxHistoryBytes`: 8 MiB of checkpoints' JSON a page. */
export const defaultMaxHistoryBytes = 8 * 1024 * 1024;

export function registerHistoryRoutes(app: Hono, options: HistoryRoutesOptions): void {
  const { runner, scoped, unscoped, idPattern, maxHistoryBytes } = options;

  app.get("/runs/:threadId/history", async (c) => {
    const runId = c.req.query("runId");
    if (runId !== undefined && !idPattern.test(runId)) throw invalid(`\`runId\` matches ${idPattern}`);
    const afterSeq = Number(c.req.query("afterSeq") ?? 0);
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) throw invalid("`afterSeq` is a checkpoint's seq");
    const limit = Number(c.req.query("limit") ?? defaultHistoryLimit);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > maxHistoryLimit)
      throw invalid(`\`limit\` is 1 to ${maxHistoryLimit}`);
    // One checkpoint past the page tells whether another page follows; the read stops at the checkpoint
    // that passes the bytes, so it holds at most the page and one checkpoint.
    const read = await runner.history(scoped(c, c.req.param("threadId")), {
      afterSeq,
      limit: limit + 1,
      maxBytes: maxHistoryBytes,
      ...(runId === undefined ? {} : { runId }),
    });
    return c.json(historyPage(read, limit, maxHistoryBytes));
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

/**
 * The checkpoints that fit a page: at most `limit`, and no more once their JSON passes `maxBytes`
 * (every checkpoint carries the whole state, so a count alone does not bound the answer).
 */
function historyPage(read: readonly Checkpoint[], limit: number, maxBytes: number) {
  const kept: Checkpoint[] = [];
  let bytes = 0;
  for (const checkpoint of read.slice(0, limit)) {
    const size = checkpointBytes(checkpoint);
    if (kept.length > 0 && bytes + size > maxBytes) break;
    kept.push(checkpoint);
    bytes += size;
  }
  const last = kept.at(-1);
  // A lone checkpoint past the bytes stopped the read: more may follow it.
  const more = kept.length < read.length || bytes > maxBytes;
  const checkpoints = kept.map(toJson);
  return more && last !== undefined ? { checkpoints, nextAfterSeq: last.seq } : { checkpoints };
}

function toJson(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_key, entry) => (typeof entry === "bigint" ? entry.toString() : entry)),
  );
}
