/** `tackle mcp` answers every request it read before it exits at the end of its stdin. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { cleanEnv, runTackle } from "./tackle-process.ts";

const slowBundle = fileURLToPath(new URL("./fixtures/slow-bundle.mjs", import.meta.url));

test("requests still running when stdin closes are answered before tackle mcp exits (they were dropped)", async () => {
  const lines = [
    {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "0" } },
    },
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "slow.wait", arguments: { ms: 400 } } },
    { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "slow.wait", arguments: { ms: 100 } } },
    { jsonrpc: "2.0", id: 4, method: "tools/list" },
  ];
  const finished = await runTackle(["mcp"], {
    env: cleanEnv({ MESH_TOOL_MODULES: `slow=${slowBundle}`, TACKLE_LOG_LEVEL: "silent" }),
    input: `${lines.map((line) => JSON.stringify(line)).join("\n")}\n`,
  });
  assert.equal(finished.code, 0, finished.stderr);
  const replies = finished.stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as { id?: number; result?: { structuredContent?: unknown } });
  const byId = new Map(replies.filter((reply) => reply.id !== undefined).map((reply) => [reply.id, reply]));
  assert.deepEqual([...byId.keys()].sort(), [1, 2, 3, 4]);
  assert.deepEqual(byId.get(2)?.result?.structuredContent, { waited: 400 });
  assert.deepEqual(byId.get(3)?.result?.structuredContent, { waited: 100 });
});
