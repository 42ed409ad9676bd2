/**
 * A process the retry test kills between two tries of a step: one tool calls a real HTTP service
 * under a retry policy and appends a line per try to a file.
 * Usage: retry-child.ts <sqlite path> <effects path> <thread id> <service url> <backoff ms> start|resume
 */
import { appendFileSync } from "node:fs";
import { createGraph, createRunner, tool } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";

const [databasePath, effectsPath, threadId, url, backoffMs, mode] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];

const graph = createGraph<{ rate?: number }>("retry").node("fetch", async (_state, ctx) => {
  const body = await tool(
    ctx,
    "rates",
    { currency: "EUR" },
    async (info) => {
      appendFileSync(effectsPath, `${JSON.stringify({ key: info.idempotencyKey, attempt: info.attempt })}\n`);
      const response = await fetch(url, { signal: info.signal });
      if (!response.ok) {
        throw Object.assign(new Error(`rates service answered ${response.status}`), {
          status: response.status,
        });
      }
      return (await response.json()) as { rate: number };
    },
    { retry: { attempts: 5, backoff: { initialMs: Number(backoffMs), factor: 1 } }, timeoutMs: 10_000 },
  );
  return { rate: body.rate };
});

const store = createSqliteStore({ path: databasePath });
// leaseMs 0: the test knows the killed process is dead, so the fresh one takes over at once.
const runner = createRunner({ store, graphs: [graph], leaseMs: 0 });
process.stdout.write("ready\n");
const result = mode === "start" ? await runner.start(graph, {}, { threadId }) : await runner.resume(threadId);
await store.close();
process.stdout.write(`${result.status} ${JSON.stringify(result.state)}\n`);
process.exitCode = result.status === "completed" ? 0 : 1;
