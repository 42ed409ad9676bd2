/**
 * The refund example. Each command is its own process, as a pause for a human would be:
 *
 *   node_modules/.bin/node --conditions=@tackle/source examples/refund/main.ts start ORD-42
 *   node_modules/.bin/node --conditions=@tackle/source examples/refund/main.ts approve <threadId> yes
 *   node_modules/.bin/node --conditions=@tackle/source examples/refund/main.ts frames <threadId>
 *
 * With no command it runs both steps in a row (a fresh runner for the resume) and prints the frames.
 * `--db <file>` and `--ledger <file>` choose where the run and the services' call log live.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createRunner, type Frame } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createRefundGraph } from "./refund-graph.ts";
import { createServices, readLedger } from "./services.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    db: { type: "string", default: join(tmpdir(), "tackle-refund-example.sqlite") },
    ledger: { type: "string", default: join(tmpdir(), "tackle-refund-example.ledger") },
  },
});
const [command = "demo", ...rest] = positionals;
const store = createSqliteStore({ path: values.db });
const graph = createRefundGraph(createServices(values.ledger));
const runner = createRunner({ store, graphs: [graph] });

function show(frame: Frame): string {
  return `${String(frame.seq).padStart(3)} ${frame.type.padEnd(15)} ${JSON.stringify(frame.data)}`;
}

async function start(orderId: string): Promise<string> {
  const run = await runner.start(graph, { input: orderId });
  console.log(JSON.stringify({ threadId: run.threadId, status: run.status, interrupts: run.interrupts }));
  return run.threadId;
}

async function answer(threadId: string, yes: boolean): Promise<void> {
  const run = await runner.get(threadId);
  const open = run?.interrupts[0];
  if (open === undefined) throw new Error(`Thread ${threadId} waits for no approval`);
  const done = await runner.resume(threadId, { [open.id]: { approved: yes } });
  console.log(JSON.stringify({ threadId, status: done.status, reply: done.state.reply }));
}

try {
  if (command === "start") await start(rest[0] ?? "ORD-42");
  else if (command === "approve") await answer(rest[0] ?? "", rest[1] !== "no");
  else if (command === "frames")
    for (const frame of await runner.frames(rest[0] ?? "")) console.log(show(frame));
  else {
    const threadId = await start("ORD-42");
    await answer(threadId, true);
    for (const frame of await runner.frames(threadId)) console.log(show(frame));
    console.log(readLedger(values.ledger).filter((entry) => entry.orderId === "ORD-42"));
  }
} catch (error) {
  // A mistyped thread id is the user's to fix: one line, not a stack trace.
  console.error(`refund: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  await store.close();
}
