/**
 * Memory floods (ADR 0551), over real HTTP (`serveMemory`) on a SQLite file, one tenant's key: a large
 * core block in each of many scopes (`maxCoreBlocks`, `maxCoreBlockBytes`), and many imports queued
 * faster than they run (`maxQueuedJobs`).
 */
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import {
  countRefusal,
  errorCode,
  type FloodRow,
  inParallel,
  measured,
  mib,
  rest,
  sqliteBytes,
  type Variant,
} from "./measure.ts";

const apiKey = "key-acme-0123456789";
const unbounded = Number.POSITIVE_INFINITY;

async function serve(path: string, quotas: Record<string, number>): Promise<MemoryServer> {
  return serveMemory({ store: path, apiKeys: { [apiKey]: "acme" }, port: 0, quotas });
}

async function post(
  server: MemoryServer,
  route: string,
  body: unknown,
): Promise<[number, string | undefined]> {
  const response = await fetch(`${server.url}${route}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return response.ok ? [response.status, undefined] : [response.status, errorCode(text)];
}

/** One row of a query on the store's file, read beside the service (WAL: readers do not block it). */
function query(path: string, sql: string): Record<string, number> {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return database.prepare(sql).get() as Record<string, number>;
  } finally {
    database.close();
  }
}

/** Blocks a call creates, each of 20,000 characters of `€` (60,000 bytes, the most a block holds). */
const blocksPerCall = 20;

/**
 * Calls each creating 20 blocks of 60,000 bytes in a scope of their own, 4 at once. Each save counts the
 * tenant's blocks and bytes before and after its writes (ADR 0551) from each block's kept size through
 * an index (ADR 0557); before that it read every block the tenant held, so the flood sends few large
 * saves, as it did then.
 */
export async function coreBlocksFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const calls = Math.round(80 * scale);
  const path = join(directory, "memory.sqlite");
  const server = await serve(
    path,
    variant === "bounded" ? {} : { maxCoreBlocks: unbounded, maxCoreBlockBytes: unbounded },
  );
  const refused: Record<string, number> = {};
  let accepted = 0;
  const took: number[] = [];
  try {
    const text = "€".repeat(20_000);
    const edits = Array.from({ length: blocksPerCall }, (_, index) => ({
      op: "create",
      label: `notes_${index}`,
      limit: 20_000,
      text,
    }));
    const result = await measured(() =>
      inParallel(calls, 4, async (call) => {
        const started = performance.now();
        const [status, code] = await post(server, "/v1/core-memory", { userId: `u${call}`, edits });
        took[call] = performance.now() - started;
        if (status === 200) accepted++;
        else countRefusal(refused, status, code);
      }),
    );
    const held = query(
      path,
      "SELECT count(*) AS blocks, coalesce(sum(length(CAST(value AS BLOB))), 0) AS bytes FROM memory_core_blocks",
    );
    const mean = (from: number, to: number) =>
      (took.slice(from, to).reduce((sum, ms) => sum + ms, 0) / Math.max(1, to - from) / 1000).toFixed(2);
    return {
      flood: "memory: core blocks",
      workload: `${calls} calls of one tenant, each creating ${blocksPerCall} blocks of 60,000 bytes in a scope of its own, 4 at once`,
      service:
        variant === "bounded"
          ? "bounded (maxCoreBlocks 10,000, maxCoreBlockBytes 64 MiB, defaults)"
          : "unbounded (both: Infinity)",
      accepted,
      refused,
      storedBytes: sqliteBytes(path),
      ...rest(result),
      notes: `${held.blocks} blocks of ${mib(held.bytes ?? 0)} MiB held; a call took ${mean(0, 10)} s (first 10), ${mean(calls - 10, calls)} s (last 10)`,
    };
  } finally {
    await server.close();
  }
}

/** An import of 40 turns of 5,000 characters (about 200 KB), as a caller sends it. */
function importRequest(index: number) {
  const messages = Array.from({ length: 40 }, (_, turn) => ({
    role: turn % 2 === 0 ? "user" : "assistant",
    content: `import ${index} turn ${turn} ${"z".repeat(5_000)}`,
  }));
  return {
    userId: "di",
    sessionId: `s${index}`,
    format: "openai",
    conversations: [{ messages }],
    infer: false,
  };
}

const waitingSql =
  "SELECT count(*) AS jobs, coalesce(sum(length(CAST(input AS BLOB))), 0) AS bytes FROM memory_jobs WHERE status IN ('queued', 'running')";

/**
 * Imports sent 16 at once, faster than they run. Measured until the last is answered: the jobs still
 * waiting then run on unmeasured (each is resumed after a restart), so the service is closed with them.
 */
export async function queuedJobsFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const imports = Math.round(200 * scale);
  const path = join(directory, "memory.sqlite");
  const server = await serve(path, variant === "bounded" ? {} : { maxQueuedJobs: unbounded });
  const refused: Record<string, number> = {};
  let accepted = 0;
  let peakJobs = 0;
  let peakBytes = 0;
  let peakFile = 0;
  try {
    const result = await measured(async () => {
      const watch = setInterval(() => {
        const waiting = query(path, waitingSql);
        peakJobs = Math.max(peakJobs, waiting.jobs ?? 0);
        peakBytes = Math.max(peakBytes, waiting.bytes ?? 0);
        peakFile = Math.max(peakFile, sqliteBytes(path));
      }, 100);
      try {
        await inParallel(imports, 16, async (index) => {
          const [status, code] = await post(server, "/v1/jobs/import", importRequest(index));
          if (status === 202) accepted++;
          else countRefusal(refused, status, code);
        });
      } finally {
        clearInterval(watch);
      }
    });
    return {
      flood: "memory: queued imports",
      workload: `${imports} imports of 40 turns (≈ 200 KB each) by one tenant, 16 at once`,
      service:
        variant === "bounded"
          ? "bounded (maxQueuedJobs 100, default)"
          : "unbounded (maxQueuedJobs: Infinity)",
      accepted,
      refused,
      storedBytes: sqliteBytes(path),
      ...rest(result),
      notes: `at most ${peakJobs} jobs waiting holding ${mib(peakBytes)} MiB of inputs; file at most ${mib(peakFile)} MiB`,
    };
  } finally {
    await server.close();
  }
}
