/**
 * `tackle mcp` as a real child process bounds the requests it handles at once (ADR 0270): past
 * `--max-in-flight` a request waits in line, in order, and past `--max-waiting` it is answered at once
 * with -32000 and `data.code` `overloaded` (retryable), readable by the MCP SDK client. A cancel takes a
 * waiting request out of the line (it never runs) and frees a running one's place; `ping` and a
 * 2026-07-28 listen take none; every place comes back, and requests still in line when stdin closes
 * are answered before the process exits.
 */
import assert from "node:assert/strict";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, ProtocolError } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { underLoadMs } from "@tackle/test-support";
import { cleanEnv, mainScript, runTackle } from "./tackle-process.ts";

const heldBundle = fileURLToPath(new URL("./fixtures/held-bundle.mjs", import.meta.url));
const env = () => cleanEnv({ MESH_TOOL_MODULES: `held=${heldBundle}`, TACKLE_LOG_LEVEL: "silent" });
const bounds = ["--max-in-flight", "3", "--max-waiting", "2"];

interface Message {
  readonly id?: string | number | null;
  readonly method?: string;
  readonly params?: { readonly progressToken?: string | number };
  readonly result?: { readonly structuredContent?: unknown };
  readonly error?: { readonly code: number; readonly message: string; readonly data?: unknown };
}

/** A `tackle mcp` child fed raw lines; every message it writes is kept, and `until` waits for one. */
function startMcp(args: readonly string[]) {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ["--conditions=@tackle/source", mainScript, "mcp", ...args],
    { env: env() },
  );
  const messages: Message[] = [];
  let buffered = "";
  let changed = () => {};
  child.stdout.setEncoding("utf8").on("data", (text: string) => {
    buffered += text;
    for (let end = buffered.indexOf("\n"); end !== -1; end = buffered.indexOf("\n")) {
      messages.push(JSON.parse(buffered.slice(0, end)) as Message);
      buffered = buffered.slice(end + 1);
    }
    changed();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return {
    messages,
    exited,
    send(message: unknown) {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    },
    /** The tool calls started so far, by progress token, in the order they started. */
    started: () =>
      messages
        .filter((message) => message.method === "notifications/progress")
        .map((message) => message.params?.progressToken),
    reply: (id: number) => messages.find((message) => message.id === id && message.method === undefined),
    async until(what: string, condition: () => boolean, ms = underLoadMs(15_000)): Promise<void> {
      const deadline = Date.now() + ms;
      while (!condition()) {
        if (Date.now() > deadline)
          assert.fail(`waited ${ms} ms for ${what}; got ${JSON.stringify(messages)}`);
        await new Promise<void>((resolve) => {
          changed = resolve;
          setTimeout(resolve, 50);
        });
      }
    },
    async stop() {
      child.stdin.end();
      const deadline = setTimeout(() => child.kill("SIGKILL"), underLoadMs(15_000));
      await exited;
      clearTimeout(deadline);
    },
  };
}

const hold = (id: number, ms: number) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name: "held.hold", arguments: { ms }, _meta: { progressToken: id } },
});
const cancel = (requestId: number) => ({
  jsonrpc: "2.0",
  method: "notifications/cancelled",
  params: { requestId, reason: "test" },
});

test("past its places a request waits in line in order, past the line it is refused overloaded at once; cancels and ends give every place back", async () => {
  const mcp = startMcp(bounds);
  try {
    mcp.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    });
    await mcp.until("initialize answered", () => mcp.reply(1) !== undefined);
    mcp.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    for (const id of [10, 11, 12, 13, 14, 15]) mcp.send(hold(id, 120_000));
    await mcp.until("the refusal of the sixth", () => mcp.reply(15) !== undefined);
    assert.deepEqual(mcp.reply(15)?.error, {
      code: -32000,
      message: "tackle mcp is handling 3 requests at once and holding 2 more in line, its most; retry in 1 s",
      data: { code: "overloaded", retryable: true, retryAfterSeconds: 1, maxInFlight: 3, maxWaiting: 2 },
    });
    await mcp.until("three calls running", () => mcp.started().length === 3);
    assert.deepEqual(mcp.started(), [10, 11, 12]);
    // A ping holds nothing: answered while every place is taken.
    mcp.send({ jsonrpc: "2.0", id: 16, method: "ping" });
    await mcp.until("the ping answered", () => mcp.reply(16) !== undefined);
    assert.deepEqual(mcp.reply(16)?.result, {});
    assert.deepEqual(mcp.started(), [10, 11, 12], "the waiting calls wait");

    // A running call cancelled gives its place to the first in line; a waiting one cancelled never runs.
    mcp.send(cancel(10));
    await mcp.until("the first in line started", () => mcp.started().length === 4);
    assert.deepEqual(mcp.started(), [10, 11, 12, 13]);
    mcp.send(cancel(14));
    for (const id of [11, 12, 13]) mcp.send(cancel(id));

    // Every place is back: three calls at once, two in line started in their order as the others end,
    // and those still waiting when stdin closes are answered before the process exits.
    for (const id of [20, 21, 22]) mcp.send(hold(id, 1_500));
    for (const id of [23, 24]) mcp.send(hold(id, 100));
    await mcp.until("three new calls running", () => mcp.started().length === 7);
    assert.deepEqual(mcp.started().slice(4), [20, 21, 22]);
    await mcp.stop();
    assert.equal(await mcp.exited, 0);
    assert.deepEqual(mcp.started().slice(4), [20, 21, 22, 23, 24]);
    for (const id of [20, 21, 22, 23, 24]) assert.ok(mcp.reply(id)?.result, `call ${id} answered`);
    for (const id of [10, 11, 12, 13, 14])
      assert.equal(mcp.reply(id), undefined, `cancelled ${id} not answered`);
    assert.ok(!mcp.started().includes(14), "the call cancelled in line never ran");
  } finally {
    await mcp.stop();
  }
});

function sdkTransport(args: readonly string[]) {
  return new StdioClientTransport({
    command: process.execPath,
    args: ["--conditions=@tackle/source", mainScript, "mcp", ...args],
    env: env() as Record<string, string>,
    stderr: "pipe",
  });
}

for (const [label, mode] of [
  ["2025 (initialize handshake)", "legacy"],
  ["2026-07-28 (pinned)", { pin: "2026-07-28" }],
] as const) {
  test(`a ${label} SDK client reads the refusal past the line, and its waiting call runs once a held one is cancelled`, async () => {
    const client = new Client(
      { name: "stdio-in-flight", version: "1.0.0" },
      { versionNegotiation: { mode } },
    );
    await client.connect(sdkTransport(["--max-in-flight", "2", "--max-waiting", "1"]));
    try {
      // On 2026-07-28 a listen is open beside the calls and takes none of their places.
      if (mode !== "legacy") await client.listen({ resourceSubscriptions: ["held://nothing"] });
      const started: string[] = [];
      const call = (label: string, ms: number, signal?: AbortSignal) =>
        client.callTool(
          { name: "held.hold", arguments: { ms } },
          { onprogress: () => started.push(label), ...(signal === undefined ? {} : { signal }) },
        );
      const controller = new AbortController();
      const held = [call("a", 120_000, controller.signal), call("b", 120_000, controller.signal)];
      const deadline = Date.now() + underLoadMs(15_000);
      while (started.length < 2 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.deepEqual(started.sort(), ["a", "b"]);
      const waiting = call("c", 10);
      await assert.rejects(call("d", 10), (error: unknown) => {
        assert.ok(error instanceof ProtocolError, String(error));
        assert.equal(error.code, -32000);
        assert.match(
          error.message,
          /handling 2 requests at once and holding 1 more in line, its most; retry in 1 s/,
        );
        assert.deepEqual(error.data, {
          code: "overloaded",
          retryable: true,
          retryAfterSeconds: 1,
          maxInFlight: 2,
          maxWaiting: 1,
        });
        return true;
      });
      assert.deepEqual(started.sort(), ["a", "b"], "c waits");
      controller.abort();
      for (const call of held) await assert.rejects(call);
      assert.deepEqual((await waiting).structuredContent, { held: 10 });
      // Both places are back.
      const again = await Promise.all([call("e", 10), call("f", 10)]);
      for (const result of again) assert.deepEqual(result.structuredContent, { held: 10 });
    } finally {
      await client.close();
    }
  });
}

test("the bounds' flags refuse what is not a count (exit 2), and the printed client entries pass them on", async () => {
  const zero = await runTackle(["mcp", "--max-in-flight", "0"]);
  assert.equal(zero.code, 2);
  assert.match(zero.stderr, /--max-in-flight must be a whole number, at least 1 \(got "0"\)/);
  const word = await runTackle(["serve", "--max-streams", "many"]);
  assert.equal(word.code, 2);
  assert.match(word.stderr, /--max-streams must be a whole number, at least 1 \(got "many"\)/);
  const printed = await runTackle(["mcp", "--max-in-flight", "8", "--max-waiting", "0", "--print-config"]);
  assert.equal(printed.code, 0, printed.stderr);
  assert.match(printed.stdout, /"--max-in-flight",\s*"8",\s*"--max-waiting",\s*"0"/);
});
