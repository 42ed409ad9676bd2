/**
 * An HTTP front for `tackle mcp`, which speaks MCP over stdio only, so the public conformance suite
 * (which drives servers over Streamable HTTP only) can reach it. It runs `tackle mcp` as a real child
 * process and relays: a POSTed request goes to the child's stdin, and the reply is an event stream of
 * every message the child writes until the one answering it (progress and log notifications
 * included); a POSTed notification is written and answered 202. It keeps no sessions and holds no
 * standalone stream (GET is 405), so the transport scenarios (DNS rebinding, SSE) are not run through
 * it: they would test this bridge, not `tackle mcp`. Tool names are mapped as for the console.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { cleanEnv, mainScript } from "../tackle-process.ts";
import { toConsole, toSuite } from "./suite-proxy.ts";

export interface StdioBridge {
  readonly url: string;
  close(): Promise<void>;
}

interface Pending {
  readonly id: unknown;
  readonly response: ServerResponse;
}

async function readAll(stream: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startStdioBridge(env: Record<string, string>): Promise<StdioBridge> {
  const child: ChildProcess = spawn(process.execPath, ["--conditions=@tackle/source", mainScript, "mcp"], {
    env: cleanEnv(env),
    stdio: ["pipe", "pipe", "inherit"],
  });
  const pending: Pending[] = [];
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  lines.on("line", (line) => {
    if (line.trim() === "") return;
    const message = JSON.parse(line) as { id?: unknown; method?: string };
    const event = `event: message\ndata: ${toSuite(line)}\n\n`;
    if (message.method !== undefined) {
      // A notification (progress, a log line) belongs to the call in flight: the suite makes one at a time.
      for (const open of pending) open.response.write(event);
      return;
    }
    const index = pending.findIndex((open) => open.id === message.id);
    const answered = index >= 0 ? pending.splice(index, 1)[0] : undefined;
    answered?.response.end(event);
  });

  // A child that dies (a crash, a refused configuration) answers every call open or yet to come with an
  // error naming its exit, instead of leaving the suite to time out; its stderr says why.
  let exited: string | undefined;
  const answerExited = (open: Pending) => {
    const error = { code: -32603, message: `tackle mcp exited (${exited}) before answering` };
    open.response.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: open.id, error })}\n\n`);
  };
  child.once("exit", (code, signal) => {
    exited = signal ?? `code ${code}`;
    for (const open of pending.splice(0)) answerExited(open);
  });

  const server = createServer(async (request, response) => {
    if (request.method !== "POST") {
      response.writeHead(405, { allow: "POST" }).end();
      return;
    }
    const body = toConsole(await readAll(request));
    let message: { id?: unknown; method?: string };
    try {
      message = JSON.parse(body) as typeof message;
    } catch {
      response.writeHead(400).end();
      return;
    }
    if (message.id === undefined || message.method === undefined) {
      child.stdin?.write(`${body}\n`);
      response.writeHead(202).end();
      return;
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (exited !== undefined) {
      answerExited({ id: message.id, response });
      return;
    }
    pending.push({ id: message.id, response });
    child.stdin?.write(`${body}\n`);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      server.closeAllConnections();
      server.close();
      const ended =
        child.exitCode === null && child.signalCode === null ? once(child, "exit") : Promise.resolve();
      child.stdin?.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await ended;
      clearTimeout(timer);
    },
  };
}
