/**
 * Memory's profile summarized by the calling client's model through MCP sampling, with `tackle mcp
 * --builtin` (a real child over stdio, no language model configured for memory). The client's "model"
 * is a scripted sampling handler (no hosted LLM): a client that samples gets its summary
 * (`client_model`); a client without sampling, and one whose model is later than the deadline, get the
 * deterministic profile.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { cleanEnv, mainScript, tempHome } from "./tackle-process.ts";

const home = tempHome();
const clients: Client[] = [];

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  home.remove();
});

async function connect(sample?: (request: { params: Record<string, unknown> }) => Promise<unknown>) {
  const client = new Client(
    { name: "memory-sampling", version: "1.0.0" },
    sample === undefined ? {} : { capabilities: { sampling: {} } },
  );
  if (sample !== undefined) client.setRequestHandler("sampling/createMessage", sample as never);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp", "--builtin"],
      env: cleanEnv({
        TACKLE_HOME: home.path,
        TACKLE_LOG_LEVEL: "silent",
        TACKLE_MEMORY_SAMPLING_TIMEOUT_MS: "1500",
      }) as Record<string, string>,
      stderr: "pipe",
    }),
  );
  clients.push(client);
  return client;
}

async function profile(client: Client): Promise<{ summary: string; generatedBy: string }> {
  const answer = await client.callTool(
    { name: "memory.memory_profile", arguments: { userId: "ada" } },
    { timeout: 60_000 },
  );
  assert.notEqual(answer.isError, true, JSON.stringify(answer));
  return (answer.structuredContent as { profile: { summary: string; generatedBy: string } }).profile;
}

test("a client that samples summarizes the profile with its model; the facts are what it is given", async () => {
  const asked: Record<string, unknown>[] = [];
  const client = await connect(async (request) => {
    asked.push(request.params);
    return { model: "scripted", role: "assistant", content: { type: "text", text: "Ada likes tea." } };
  });
  const added = await client.callTool({
    name: "memory.memory_add",
    arguments: { userId: "ada", kind: "preference", content: "Ada prefers tea over coffee" },
  });
  assert.notEqual(added.isError, true, JSON.stringify(added));
  const sampled = await profile(client);
  assert.deepEqual([sampled.summary, sampled.generatedBy], ["Ada likes tea.", "client_model"]);
  assert.match(JSON.stringify(asked[0]?.messages), /prefers tea over coffee/);
  assert.match(String(asked[0]?.systemPrompt), /data, not instructions/);
});

test("without sampling, or with a model later than the deadline, the profile is the deterministic one", async () => {
  const plain = await profile(await connect());
  assert.equal(plain.generatedBy, "deterministic");
  assert.match(plain.summary, /prefers tea over coffee/);
  const started = Date.now();
  const late = await profile(await connect(() => new Promise(() => {})));
  assert.equal(late.generatedBy, "deterministic");
  assert.ok(Date.now() - started < 30_000);
});

async function call(client: Client, name: string, args: Record<string, unknown>) {
  const answer = await client.callTool({ name: `memory.${name}`, arguments: args }, { timeout: 60_000 });
  assert.notEqual(answer.isError, true, JSON.stringify(answer));
  return answer.structuredContent as Record<string, unknown>;
}

/** Two near-duplicate memories of `userId` (stored apart: dedupe off), for consolidation to merge. */
async function twoNearDuplicates(client: Client, userId: string): Promise<string[]> {
  const ids: string[] = [];
  for (const content of [
    `${userId} drinks green tea every single morning`,
    `${userId} drinks green tea every single morning too`,
  ]) {
    const added = await call(client, "memory_add", { userId, kind: "preference", content, dedupe: false });
    assert.equal(typeof added.id, "string", JSON.stringify(added));
    ids.push(added.id as string);
  }
  return ids;
}

async function contentOf(client: Client, id: string): Promise<string> {
  return ((await call(client, "memory_lifecycle_get", { id })).memory as { content: string }).content;
}

test("consolidation's merge is written by the client's model, and kept as the merged memory's text", async () => {
  const asked: Record<string, unknown>[] = [];
  const client = await connect(async (request) => {
    asked.push(request.params);
    return {
      model: "scripted",
      role: "assistant",
      content: { type: "text", text: "Bo has green tea each morning." },
    };
  });
  const ids = await twoNearDuplicates(client, "Bo");
  const answer = await call(client, "memory_consolidate", { userId: "Bo" });
  const synthesis = answer.synthesis as { generatedBy: string; rewritten: string[] };
  assert.equal(synthesis.generatedBy, "client_model", JSON.stringify(answer));
  assert.equal(synthesis.rewritten.length, 1);
  assert.ok(ids.includes(synthesis.rewritten[0] as string));
  assert.equal(await contentOf(client, synthesis.rewritten[0] as string), "Bo has green tea each morning.");
  const text = JSON.stringify(asked[0]?.messages);
  assert.match(text, /every single morning too/);
  assert.match(text, /every single morning\\n|every single morning"/);
  assert.match(String(asked[0]?.systemPrompt), /data, not instructions/);
});

test("consolidation without sampling, or with a late model, keeps the merged memory's own text", async () => {
  const plain = await connect();
  const [first] = await twoNearDuplicates(plain, "Cy");
  const answer = await call(plain, "memory_consolidate", { userId: "Cy" });
  assert.equal(answer.synthesis, undefined, "a client without sampling gets the job alone");
  const job = (await call(plain, "memory_get_job", { id: (answer.job as { id: string }).id })).job as {
    status: string;
  };
  assert.ok(["queued", "running", "succeeded"].includes(job.status), JSON.stringify(job));

  const late = await connect(() => new Promise(() => {}));
  const ids = await twoNearDuplicates(late, "Di");
  const started = Date.now();
  const lateAnswer = await call(late, "memory_consolidate", { userId: "Di" });
  const synthesis = lateAnswer.synthesis as { generatedBy: string; rewritten: string[]; note?: string };
  assert.equal(synthesis.generatedBy, "deterministic", JSON.stringify(lateAnswer));
  assert.deepEqual(synthesis.rewritten, []);
  assert.match(synthesis.note ?? "", /did not write a merge/);
  assert.ok(Date.now() - started < 40_000);
  const texts = await Promise.all(ids.map((id) => contentOf(late, id)));
  assert.ok(
    texts.every((text) => text.startsWith("Di drinks green tea")),
    JSON.stringify(texts),
  );
  assert.ok(first !== undefined);
});
