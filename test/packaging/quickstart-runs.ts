/**
 * Runs a package README's quickstart inside the consumer project on Node 24. What the README declares
 * and leaves to the reader (an orders service, a broker, a running memory service) is provided here:
 * a stand-in prelude for declared names, a private nats-server, the installed `tackle-memory` bin.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { startNatsServer, underLoadMs } from "@tackle/test-support";

/** The environment the consumer's programs run with: Node 24 first on PATH, no broker of the caller's. */
export function consumerEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ""}`,
    ...extra,
  };
  for (const variable of ["MESH_BROKER_URL", "MESH_BROKER_FILE", "MESH_TOOL_MODULES", "TACKLE_MEMORY_URL"])
    if (!(variable in extra)) delete env[variable];
  return env;
}

/**
 * Starts `npx <args>` in a process group of its own, so that stopping it stops what npx started too
 * (a SIGTERM to npx alone leaves its node child serving, holding its port).
 */
export function startGroup(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv) {
  const child = spawn("npx", args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal);
    } catch {
      // the group is gone already
    }
  };
  return {
    child,
    /** SIGTERM to the group; SIGKILL after 10 s. */
    async stop(): Promise<void> {
      signalGroup("SIGTERM");
      const timer = setTimeout(() => signalGroup("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      signalGroup("SIGKILL");
    },
  };
}

function runFile(consumer: string, file: string, source: string, env: NodeJS.ProcessEnv): string {
  writeFileSync(path.join(consumer, file), source);
  try {
    return execFileSync(process.execPath, [file], {
      cwd: consumer,
      encoding: "utf8",
      timeout: underLoadMs(120_000),
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${file} failed:\n${failed.stdout ?? ""}${failed.stderr ?? failed.message}`);
  }
}

const durablePrelude = `
const Orders = { async get(id: string) { return { id, total: 25 }; } };
const refunds: string[] = [];
const Payments = { async refund(order: { id: string }, key: string) { refunds.push(\`\${order.id}:\${key}\`); } };
`;

const notesBundle = `
import { defineTool } from "@tackle/core";
import { z } from "zod";
export default () => ({
  tools: [
    defineTool({
      name: "upper",
      description: "Upper-cases text.",
      input: z.object({ text: z.string() }),
      execute: ({ text }) => text.toUpperCase(),
    }),
  ],
});
`;

async function runMesh(code: string, consumer: string): Promise<void> {
  const nats = await startNatsServer({ jetstream: true });
  try {
    writeFileSync(path.join(consumer, "notes.mjs"), notesBundle);
    const source = code.replaceAll("nats://127.0.0.1:4222", nats.url);
    const env = consumerEnv({
      MESH_BROKER_URL: nats.url,
      MESH_NODE: "bench-01",
      MESH_TOOL_MODULES: `notes=${path.join(consumer, "notes.mjs")}`,
    });
    const output = runFile(
      consumer,
      "run-mesh.ts",
      `${source}\nconsole.log(JSON.stringify({ result }));\n`,
      env,
    );
    assert.match(output, /"output":"HI"/, output);
  } finally {
    await nats.stop();
  }
}

async function runMemory(code: string, consumer: string): Promise<void> {
  // The quickstart's client reaches "the local default service": tackle-memory serve on its default
  // address, 127.0.0.1:4280 (a TACKLE_MEMORY_URL on loopback would need allowPrivateNetwork).
  const store = path.join(consumer, "memory", "memory.db");
  const { child: server, stop } = startGroup(
    ["tackle-memory", "serve", "--store", store],
    consumer,
    consumerEnv(),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      let output = "";
      const timer = setTimeout(
        () => reject(new Error(`tackle-memory did not start:\n${output}`)),
        underLoadMs(60_000),
      );
      const read = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('"listening"')) {
          clearTimeout(timer);
          resolve();
        }
      };
      server.stdout.on("data", read);
      server.stderr.on("data", read);
      server.once("exit", (status) => reject(new Error(`tackle-memory exited ${status}:\n${output}`)));
    });
    const key = readFileSync(path.join(consumer, "memory", "memory-api-key"), "utf8").trim();
    const env = consumerEnv({ TACKLE_MEMORY_API_KEY: key });
    const output = runFile(
      consumer,
      "run-memory.ts",
      `${code}\nconsole.log(JSON.stringify({ found: results.length, bundle: typeof bundle }));\n`,
      env,
    );
    assert.match(output, /"found":[1-9]/, output);
  } finally {
    await stop();
  }
}

/** Runs `name`'s quickstart `code` in `consumer`; throws with its output when it fails. */
export async function quickstartRuns(name: string, code: string, consumer: string): Promise<void> {
  switch (name) {
    case "durable": {
      const output = runFile(
        consumer,
        "run-durable.ts",
        `${durablePrelude}\n${code}\nconsole.log(JSON.stringify({ status: done.status, refunds }));\n`,
        consumerEnv(),
      );
      assert.match(output, /"status":"completed","refunds":\["ORD-42:[^"]+"\]/, output);
      return;
    }
    case "mesh":
      return runMesh(code, consumer);
    case "memory":
      return runMemory(code, consumer);
    default:
      runFile(consumer, `run-${name}.ts`, code, consumerEnv());
  }
}
