/**
 * The built-in modules' MCP prompts and completion through `tackle mcp --builtin` (a real child over
 * stdio): docscript's editing prompt carries the document's script contract, its document id
 * completes from the module, memory's guide names its tools; the seat tools that serve them are not
 * offered to the model as tools.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { cleanEnv, mainScript, tempHome } from "./tackle-process.ts";

const home = tempHome();
let client: Client;

before(async () => {
  client = new Client({ name: "builtin-prompts", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp", "--builtin"],
      env: cleanEnv({ TACKLE_HOME: home.path, TACKLE_LOG_LEVEL: "silent" }) as Record<string, string>,
      stderr: "pipe",
    }),
  );
});

after(async () => {
  await client?.close();
  home.remove();
});

test("prompts/list names docscript.edit and memory.guide; tools/list offers no seat tool", async () => {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((prompt) => prompt.name);
  assert.ok(names.includes("docscript.edit"), names.join(", "));
  assert.ok(names.includes("memory.guide"), names.join(", "));
  assert.deepEqual(
    prompts.find((prompt) => prompt.name === "docscript.edit")?.arguments?.[0]?.name,
    "doc_id",
  );
  const { tools } = await client.listTools();
  assert.ok(tools.some((tool) => tool.name === "docscript.edit"));
  assert.deepEqual(
    tools.filter((tool) => tool.name.includes(".mcp.")).map((tool) => tool.name),
    [],
  );
});

test("docscript.edit holds the document's script contract; its doc_id completes from live data", async () => {
  const prompt = await client.getPrompt({ name: "docscript.edit", arguments: { doc_id: "sample-timeline" } });
  const text = prompt.messages
    .map((message) => (message.content.type === "text" ? message.content.text : ""))
    .join("");
  assert.match(text, /entities/);
  assert.ok(text.length > 2_000, `${text.length} characters`);
  const completed = await client.complete({
    ref: { type: "ref/prompt", name: "docscript.edit" },
    argument: { name: "doc_id", value: "sam" },
  });
  assert.deepEqual(completed.completion.values, ["sample-timeline"]);
  const none = await client.complete({
    ref: { type: "ref/prompt", name: "docscript.edit" },
    argument: { name: "doc_id", value: "zzz" },
  });
  assert.deepEqual(none.completion.values, []);
  await assert.rejects(
    client.getPrompt({ name: "docscript.edit", arguments: { doc_id: "another" } }),
    /no document another opens with this token/, // a refused id answers as a missing one
  );
});

test("memory.guide names every memory tool as the client calls it", async () => {
  const prompt = await client.getPrompt({ name: "memory.guide" });
  const text = prompt.messages[0]?.content.type === "text" ? prompt.messages[0].content.text : "";
  for (const tool of ["memory.memory_search", "memory.memory_add"]) assert.ok(text.includes(tool), tool);
});
