/** `tackle mcp` as a child process, fed raw lines: what is not a JSON-RPC message gets JSON-RPC's error, and the session goes on. */
import assert from "node:assert/strict";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { test } from "node:test";
import { underLoadMs } from "@tackle/test-support";
import { cleanEnv, mainScript } from "./tackle-process.ts";

interface Reply {
  readonly jsonrpc: string;
  readonly id: string | number | null;
  readonly result?: { readonly tools?: readonly { readonly name: string }[] };
  readonly error?: { readonly code: number; readonly message: string; readonly data?: unknown };
}

/** A `tackle mcp --builtin` child whose stdout is read line by line; `next()` waits at most 10 s. */
function startMcp(): {
  child: ChildProcessWithoutNullStreams;
  next(): Promise<Reply>;
  stop(): Promise<void>;
} {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", mainScript, "mcp", "--builtin"], {
    env: cleanEnv({ TACKLE_LOG_LEVEL: "silent" }),
  });
  let buffered = "";
  const replies: Reply[] = [];
  const waiting: ((reply: Reply) => void)[] = [];
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (text: string) => {
    buffered += text;
    for (let end = buffered.indexOf("\n"); end !== -1; end = buffered.indexOf("\n")) {
      const reply = JSON.parse(buffered.slice(0, end)) as Reply;
      buffered = buffered.slice(end + 1);
      const waiter = waiting.shift();
      if (waiter === undefined) replies.push(reply);
      else waiter(reply);
    }
  });
  return {
    child,
    next() {
      const ready = replies.shift();
      if (ready !== undefined) return Promise.resolve(ready);
      return new Promise((resolve, reject) => {
        const waitMs = underLoadMs(10_000);
        const timer = setTimeout(
          () => reject(new Error(`no reply from tackle mcp within ${waitMs} ms`)),
          waitMs,
        );
        waiting.push((reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
      });
    },
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.stdin.end();
      const deadline = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(deadline);
    },
  };
}

function send(child: ChildProcessWithoutNullStreams, line: string): void {
  child.stdin.write(`${line}\n`);
}

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
});

test("a line that is not JSON gets a parse error with id null, and a later tools/list still answers", async () => {
  const mcp = startMcp();
  try {
    send(mcp.child, initialize);
    assert.equal((await mcp.next()).id, 1);
    send(mcp.child, JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
    send(mcp.child, "this is { not json");
    const parseError = await mcp.next();
    assert.equal(parseError.jsonrpc, "2.0");
    assert.equal(parseError.id, null);
    assert.equal(parseError.error?.code, -32700);
    assert.match(parseError.error?.message ?? "", /^Parse error/);
    send(mcp.child, JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }));
    const listed = await mcp.next();
    assert.equal(listed.id, 2);
    assert.ok(listed.result?.tools?.some((tool) => tool.name === "demo.add"));
  } finally {
    await mcp.stop();
  }
});

test("valid JSON that is no JSON-RPC message, or a batch, gets invalid request (-32600)", async () => {
  const mcp = startMcp();
  try {
    send(mcp.child, "{}");
    const empty = await mcp.next();
    assert.deepEqual([empty.id, empty.error?.code], [null, -32600]);
    // A readable id is kept, so the client can tell which of its requests was refused.
    send(mcp.child, JSON.stringify({ jsonrpc: "1.0", id: 7, method: "tools/list" }));
    const wrongVersion = await mcp.next();
    assert.deepEqual([wrongVersion.id, wrongVersion.error?.code], [7, -32600]);
    send(mcp.child, "42");
    assert.deepEqual((await mcp.next()).error?.code, -32600);
    send(mcp.child, JSON.stringify([{ jsonrpc: "2.0", id: 3, method: "ping" }]));
    const batch = await mcp.next();
    assert.deepEqual([batch.id, batch.error?.code], [null, -32600]);
    assert.match(batch.error?.message ?? "", /batches are not accepted/);
    // The session was never opened by any of those: the opening still works.
    send(mcp.child, initialize);
    const opened = await mcp.next();
    assert.equal(opened.id, 1);
    assert.equal(opened.error, undefined);
  } finally {
    await mcp.stop();
  }
});

test("a line over 4 MiB gets invalid request at once, without waiting for its end, and is skipped", async () => {
  const mcp = startMcp();
  try {
    send(mcp.child, initialize);
    assert.equal((await mcp.next()).id, 1);
    // No newline yet: the reply must come from the length alone (the line is not buffered to its end).
    mcp.child.stdin.write(
      `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"${"x".repeat(4 * 1024 * 1024)}`,
    );
    const tooLong = await mcp.next();
    assert.deepEqual([tooLong.id, tooLong.error?.code], [null, -32600]);
    assert.match(tooLong.error?.message ?? "", /longer than 4194304 bytes/);
    assert.deepEqual(tooLong.error?.data, { maxLineBytes: 4194304 });
    // The rest of that line, then a request: only the request is answered.
    send(mcp.child, `${"y".repeat(1024 * 1024)}"}}`);
    send(mcp.child, JSON.stringify({ jsonrpc: "2.0", id: 10, method: "tools/list" }));
    const listed = await mcp.next();
    assert.equal(listed.id, 10);
    assert.ok(listed.result?.tools?.some((tool) => tool.name === "demo.add"));
  } finally {
    await mcp.stop();
  }
});
