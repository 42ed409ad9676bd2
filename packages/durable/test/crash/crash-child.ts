/**
 * A process the crash test kills: runs (or resumes) a graph whose tools append a line per side effect
 * to a file. Usage: crash-child.ts <sqlite path> <effects path> <thread id> start|resume
 */
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, tool } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";

const [databasePath, effectsPath, threadId, mode] = process.argv.slice(2) as [string, string, string, string];
export const nodes = ["fetch", "charge", "notify"];
export const stepsPerNode = 4;

type State = Record<string, number>;
const graph = createGraph<State>("crash");
for (const [index, name] of nodes.entries()) {
  graph.node(name, async (_state, ctx) => {
    let sum = 0;
    for (let n = 0; n < stepsPerNode; n++) {
      sum += await tool(ctx, "effect", { n }, async (info) => {
        // The side effect, then a little more work before fn returns: a crash in between is the window.
        appendFileSync(
          effectsPath,
          `${JSON.stringify({ key: info.idempotencyKey, attempt: info.attempt })}\n`,
        );
        // Tells the parent an effect landed; it kills at random points counted from these.
        process.stdout.write("effect\n");
        await sleep(1);
        return n;
      });
    }
    return { [name]: sum };
  });
  if (index > 0) graph.edge(nodes[index - 1] as string, name);
}

const store = createSqliteStore({ path: databasePath });
// leaseMs 0: the test knows the killed process is dead, so the fresh one takes over at once.
const runner = createRunner({ store, graphs: [graph], leaseMs: 0 });
process.stdout.write("ready\n");
const result = mode === "start" ? await runner.start(graph, {}, { threadId }) : await runner.resume(threadId);
await store.close();
process.stdout.write(`${result.status}\n`);
process.exitCode = result.status === "completed" ? 0 : 1;
