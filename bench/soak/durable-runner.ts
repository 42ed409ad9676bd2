/**
 * A durable runner process for the soak, serving its runs over HTTP (`serveDurable`) on a shared
 * PostgreSQL database. Usage: durable-runner.ts <postgres url> <lease ms> [port]. Prints "ready <url>".
 *
 * The graph "soak" calls three tools, each a plain INSERT into `soak_tool_effects` (one row per
 * execution, keyed by the tool call's idempotency key, with its attempt number and this process's
 * pid), with a short step between them. A tool that runs twice leaves two rows: the soak counts them.
 * The takeover test's runner (packages/durable/test/takeover/runner-child.ts) drives one thread and
 * exits; this one stays up and drives many, as a deployed runner does.
 */
import { createGraph, createRunner, tool } from "@tackle/durable";
import { serveDurable } from "@tackle/durable/http";
import { createPostgresStore } from "@tackle/durable/postgres";
import pg from "pg";

const [url, leaseArg, portArg] = process.argv.slice(2) as [string, string, string | undefined];
const effects = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000 });
// A connection cut by a PostgreSQL restart is reported to the query that used it; an idle one's error
// must not end the process.
effects.on("error", () => undefined);

const toolsPerRun = 3;
const holdMs = 100;

const graph = createGraph<{ effects?: number }>("soak").node("work", async (_state, ctx) => {
  for (let index = 1; index <= toolsPerRun; index += 1) {
    await tool(ctx, "effect", { index }, async (info) => {
      await effects.query(
        "INSERT INTO soak_tool_effects (idempotency_key, attempt, pid) VALUES ($1, $2, $3)",
        [info.idempotencyKey, info.attempt, process.pid],
      );
      return index;
    });
    await ctx.step(`hold ${index}`, () => new Promise((resolve) => setTimeout(resolve, holdMs)));
  }
  return { effects: toolsPerRun };
});

const store = await createPostgresStore({ connectionString: url });
const runner = createRunner({ store, graphs: [graph], leaseMs: Number(leaseArg) });
const server = await serveDurable({ runner, port: portArg === undefined ? 0 : Number(portArg) });
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
