/**
 * Resource updates across two servers on one PostgreSQL (issue 27, point 1: "another server on the same
 * PostgreSQL"): two `tackle serve --builtin` consoles, each with its own home, share a PostgreSQL
 * database for docscript's documents and memory's memories. A client subscribed on console A gets
 * `notifications/resources/updated` after a commit through console B, and after a memory added through
 * B; the SDK's client over HTTP, real processes, a scratch database of its own.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTestDatabase, freePort, type TestDatabase } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import { until } from "./approvals-support.ts";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const homes = [tempHome(), tempHome()];
const serves: ServeProcess[] = [];
const clients: Client[] = [];
const documentUri = "docscript://documents/sample-timeline";
let database: TestDatabase;

before(async () => {
  database = await createTestDatabase("h27_resources");
  // One after the other: each migrates the shared database under its lock either way.
  for (const home of homes) {
    serves.push(
      await startServe(
        ["--builtin", "--listen", `127.0.0.1:${await freePort()}`],
        cleanEnv({
          TACKLE_HOME: home.path,
          TACKLE_LOG_LEVEL: "silent",
          DOCSCRIPT_DATABASE: database.url,
          TACKLE_MEMORY_STORE: database.url,
        }),
      ),
    );
  }
});

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await Promise.all(serves.map((started) => started.stop()));
  for (const home of homes) home.remove();
  await database?.drop();
});

async function connect(console: ServeProcess): Promise<Client> {
  const client = new Client({ name: "resources-postgres", version: "1.0.0" });
  const headers = { authorization: `Bearer ${readConsoleToken(console.tokenFile ?? "")}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(console.url), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>) {
  const answer = await client.callTool({ name, arguments: args }, { timeout: 60_000 });
  assert.notEqual(answer.isError, true, JSON.stringify(answer));
  return answer.structuredContent as Record<string, unknown>;
}

async function commitTrack(client: Client, name: string): Promise<void> {
  const run = await call(client, "docscript.edit", {
    op: "run-edit-script",
    doc_id: "sample-timeline",
    script: `entities.create({ entityKind: 'track', payload: { role: 'bgm', name: ${JSON.stringify(name)} } });`,
  });
  assert.ok(typeof run.plan_id === "string", JSON.stringify(run));
  const commit = await call(client, "docscript.edit", {
    op: "commit-plan",
    doc_id: "sample-timeline",
    plan_id: run.plan_id,
  });
  assert.equal(commit.status, "committed", JSON.stringify(commit));
}

test("a subscriber on one console hears of a commit and a memory made through another on the same PostgreSQL", async () => {
  const [first, second] = serves as [ServeProcess, ServeProcess];
  const watcher = await connect(first);
  const updated: string[] = [];
  watcher.setNotificationHandler("notifications/resources/updated", (notification) => {
    updated.push(notification.params.uri);
  });
  const memoryUri = "memory://users/ada";
  await watcher.subscribeResource({ uri: documentUri });
  await watcher.subscribeResource({ uri: memoryUri });
  // The watcher's server reads the versions it starts from before anything changes.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  assert.equal(updated.length, 0, `nothing changed yet: ${updated.join(", ")}`);

  const writer = await connect(second);
  await commitTrack(writer, "from the other console");
  await until(() => updated.includes(documentUri), 30_000, "the update after the other console's commit");

  await call(writer, "memory.memory_add", { userId: "ada", kind: "fact", content: "Ada keeps bees" });
  await until(() => updated.includes(memoryUri), 30_000, "the update after the other console's memory");

  // And the watcher's console reads what the other one wrote.
  const read = await watcher.readResource({ uri: documentUri });
  assert.match((read.contents[0] as { text?: string }).text ?? "", /from the other console/);
});
