/**
 * Documents as MCP resources on the console (`tackle serve --builtin`, real processes, the SDK's
 * client over HTTP): listed with their template, read as a snapshot page within the budget, the
 * template's `doc_id` completed from live data, and a subscriber told when anyone commits to the
 * document — another client of the same console, or another console on the same document store.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { freePort } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import { until } from "./approvals-support.ts";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const home = tempHome();
const otherHome = tempHome();
const database = join(home.path, "documents.sqlite");
const serves: ServeProcess[] = [];
const clients: Client[] = [];
const documentUri = "docscript://documents/sample-timeline";

async function serve(at: string): Promise<ServeProcess> {
  const started = await startServe(
    ["--builtin", "--listen", `127.0.0.1:${await freePort()}`],
    cleanEnv({ TACKLE_HOME: at, TACKLE_LOG_LEVEL: "silent", DOCSCRIPT_DATABASE: database }),
  );
  serves.push(started);
  return started;
}

before(async () => {
  await serve(home.path);
});

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await Promise.all(serves.map((started) => started.stop()));
  home.remove();
  otherHome.remove();
});

async function connect(console: ServeProcess): Promise<Client> {
  const client = new Client({ name: "resources", version: "1.0.0" });
  const headers = { authorization: `Bearer ${readConsoleToken(console.tokenFile ?? "")}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(console.url), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

async function commitTrack(client: Client, name: string): Promise<void> {
  const run = await client.callTool({
    name: "docscript.edit",
    arguments: {
      op: "run-edit-script",
      doc_id: "sample-timeline",
      script: `entities.create({ entityKind: 'track', payload: { role: 'bgm', name: ${JSON.stringify(name)} } });`,
    },
  });
  const planId = (run.structuredContent as { plan_id?: string }).plan_id;
  assert.ok(planId, JSON.stringify(run));
  const commit = await client.callTool({
    name: "docscript.edit",
    arguments: { op: "commit-plan", doc_id: "sample-timeline", plan_id: planId },
  });
  assert.equal((commit.structuredContent as { status?: string }).status, "committed", JSON.stringify(commit));
}

test("the document is listed, its template named, and a read is a snapshot page within the budget", async () => {
  const client = await connect(serves[0] as ServeProcess);
  const { resources } = await client.listResources();
  assert.ok(
    resources.some((resource) => resource.uri === documentUri),
    JSON.stringify(resources),
  );
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.ok(resourceTemplates.some((template) => template.uriTemplate === "docscript://documents/{doc_id}"));
  const read = await client.readResource({ uri: documentUri });
  const text = (read.contents[0] as { text?: string }).text ?? "";
  const page = JSON.parse(text) as { op?: string; entities?: unknown[] };
  assert.equal(page.op, "snapshot");
  assert.ok(text.length < 4_000 * 8, `${text.length} characters`);
  await assert.rejects(client.readResource({ uri: "docscript://documents/another" }), /not found|another/i);
  const completed = await client.complete({
    ref: { type: "ref/resource", uri: "docscript://documents/{doc_id}" },
    argument: { name: "doc_id", value: "sam" },
  });
  assert.deepEqual(completed.completion.values, ["sample-timeline"]);
});

test("a subscriber hears of a commit by another client, and by another console on the same store", async () => {
  const first = serves[0] as ServeProcess;
  const watcher = await connect(first);
  const updated: string[] = [];
  watcher.setNotificationHandler("notifications/resources/updated", (notification) => {
    updated.push(notification.params.uri);
  });
  await watcher.subscribeResource({ uri: documentUri });

  await commitTrack(await connect(first), "from another client");
  await until(() => updated.length >= 1, 30_000, "the update after another client's commit");
  assert.equal(updated[0], documentUri);

  const second = await serve(otherHome.path);
  const seen = updated.length;
  await commitTrack(await connect(second), "from another console");
  await until(() => updated.length > seen, 30_000, "the update after another console's commit");

  await watcher.unsubscribeResource({ uri: documentUri });
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const settled = updated.length;
  await commitTrack(await connect(first), "after unsubscribing");
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  assert.equal(updated.length, settled, "no update after unsubscribing");
});
