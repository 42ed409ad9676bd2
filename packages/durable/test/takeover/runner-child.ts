/**
 * A runner process on a shared PostgreSQL database, for the takeover tests. Usage:
 * runner-child.ts <url> <table prefix> <thread> start|resume|resume-until|sweep <effects file> <lease ms> <hold ms> [clock skew ms]
 * The graph appends one line per side effect ("a", then "b"); between them a step holds for `hold ms`.
 * A clock skew makes this process's Date.now() lie, as a machine with a wrong clock would.
 * Prints "ready", waits for a line on stdin, runs, then prints the outcome as JSON. "sweep" sends no
 * resume: the runner's recovery sweep (on only in this mode) must find the run, and the process waits
 * until the run is no longer running.
 */
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createGraph, createRunner, DurableError, tool } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";

const [url, tablePrefix, threadId, mode, effectsPath, leaseArg, holdArg, skewArg] = process.argv.slice(
  2,
) as string[];
const skew = Number(skewArg ?? 0);
if (skew !== 0) {
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + skew;
}
const hold = Number(holdArg);

const graph = createGraph<{ a?: number; b?: number }>("takeover").node("work", async (_state, ctx) => {
  const a = await tool(ctx, "effect", { which: "a" }, (info) => {
    appendFileSync(
      effectsPath as string,
      `${JSON.stringify({ which: "a", pid: process.pid, key: info.idempotencyKey })}\n`,
    );
    return 1;
  });
  process.stdout.write("effect a\n");
  await ctx.step("hold", () => new Promise((resolve) => setTimeout(resolve, hold)));
  const b = await tool(ctx, "effect", { which: "b" }, (info) => {
    appendFileSync(
      effectsPath as string,
      `${JSON.stringify({ which: "b", pid: process.pid, key: info.idempotencyKey })}\n`,
    );
    return 2;
  });
  return { a, b };
});

const store = await createPostgresStore({
  connectionString: url as string,
  tablePrefix: tablePrefix as string,
});
const runner = createRunner({
  store,
  graphs: [graph],
  leaseMs: Number(leaseArg),
  recover: mode === "sweep" ? { everyMs: 1000 } : false,
});
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
async function run() {
  if (mode === "start") return runner.start(graph, {}, { threadId: threadId as string });
  if (mode === "resume") return runner.resume(threadId as string);
  if (mode === "sweep") {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const run = await runner.get(threadId as string);
      if ((run !== undefined && run.status !== "running") || Date.now() > deadline) {
        await runner.idle();
        return (await runner.get(threadId as string)) ?? { status: "missing", state: undefined };
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  // "resume-until": retry a refused takeover (the lease still runs) until it goes through, up to 60 s.
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return await runner.resume(threadId as string);
    } catch (error) {
      if (!DurableError.isInstance(error) || error.code !== "run_active" || Date.now() > deadline)
        throw error;
      process.stdout.write("refused run_active\n");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
try {
  const result = await run();
  process.stdout.write(
    `${JSON.stringify({ status: result.status, state: result.state, pid: process.pid })}\n`,
  );
} catch (error) {
  const code = DurableError.isInstance(error) ? error.code : "error";
  process.stdout.write(
    `${JSON.stringify({ error: code, message: (error as Error).message, pid: process.pid })}\n`,
  );
}
await runner.close();
await store.close();
lines.close();
