/**
 * Memories as MCP resources through `tackle mcp --builtin` (a real child over stdio, the SDK's
 * client): the tenant and the per-user template are listed, a user's memory reads as a context bundle
 * within its budget, `user_id` completes from live memories, and a subscriber to a user's memory hears
 * of a memory added to it.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { until } from "./approvals-support.ts";
import { cleanEnv, mainScript, tempHome } from "./tackle-process.ts";

const home = tempHome();
let client: Client;
const updated: string[] = [];

before(async () => {
  client = new Client({ name: "memory-resources", version: "1.0.0" });
  client.setNotificationHandler("notifications/resources/updated", (notification) => {
    updated.push(notification.params.uri);
  });
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

async function remember(userId: string, content: string): Promise<void> {
  const added = await client.callTool({
    name: "memory.memory_add",
    arguments: { userId, kind: "fact", content },
  });
  assert.notEqual(added.isError, true, JSON.stringify(added));
}

test("the tenant and the user template are listed; a user's memory reads as a bounded context bundle", async () => {
  await remember("ada", "Ada prefers tea over coffee");
  const { resources } = await client.listResources();
  assert.ok(resources.some((resource) => resource.uri === "memory://tenant"));
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.ok(resourceTemplates.some((template) => template.uriTemplate === "memory://users/{user_id}"));
  const read = await client.readResource({ uri: "memory://users/ada" });
  const bundle = JSON.parse((read.contents[0] as { text: string }).text) as {
    memories: { content: string }[];
    tokenBudget: number;
  };
  assert.ok(
    bundle.memories.some((memory) => memory.content.includes("tea")),
    JSON.stringify(bundle),
  );
  assert.equal(bundle.tokenBudget, 2_000);
  const completed = await client.complete({
    ref: { type: "ref/resource", uri: "memory://users/{user_id}" },
    argument: { name: "user_id", value: "a" },
  });
  assert.deepEqual(completed.completion.values, ["ada"]);
});

test("a subscriber to a user's memory hears of a memory added to it", async () => {
  await client.subscribeResource({ uri: "memory://users/bea" });
  await remember("bea", "Bea's train leaves at nine");
  await until(() => updated.includes("memory://users/bea"), 30_000, "the update after memory_add");
});
