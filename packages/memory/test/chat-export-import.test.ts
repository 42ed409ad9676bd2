/**
 * A ChatGPT or Claude data export imported over real HTTP (ADR 0543): each shown turn stored once,
 * with the time it was said, never a turn of an edited or regenerated branch, nothing new on a
 * re-import; a hostile tree (a loop, a missing `current_node`, 50,000 levels) refused or walked.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type ImportConversationsRequest,
  MemoryClient,
  MemoryError,
  type MemoryJob,
  splitChatExport,
} from "@tackle/memory";
import { IMPORT_LIMITS, importConversationsRequestSchema } from "@tackle/memory/schemas";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";

type ChatgptConversation = Extract<
  ImportConversationsRequest,
  { format: "chatgpt-export" }
>["conversations"][number];

const fixtures = new URL("./fixtures/", import.meta.url);
const chatgptFile = readFileSync(new URL("chatgpt-export/conversations.json", fixtures), "utf8");
const claudeFile = readFileSync(new URL("claude-export/conversations.json", fixtures), "utf8");

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-chat-export-"));
let server: MemoryServer;
let client: MemoryClient;

before(async () => {
  server = await serveMemory({ store: join(directory, "memory.db"), apiKeys: { key: "t" }, port: 0 });
  client = new MemoryClient({ baseUrl: server.url, apiKey: "key", allowPrivateNetwork: true });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

async function finished(jobs: readonly MemoryJob[]) {
  const results = [];
  for (const job of jobs) {
    const done = await client.waitForJob(job.id, { timeoutMs: 60_000, intervalMs: 20 });
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    results.push(done.result as { events: { created: number; existing: number; skipped: number } });
  }
  return {
    created: results.reduce((sum, result) => sum + result.events.created, 0),
    existing: results.reduce((sum, result) => sum + result.events.existing, 0),
    skipped: results.reduce((sum, result) => sum + result.events.skipped, 0),
  };
}

async function session(userId: string, sessionId: string) {
  const { events } = await client.recallConversation({ userId, sessionId, order: "asc", limit: 200 });
  return events.map((event) => [event.role, event.content, event.occurredAt]);
}

const lisbon = [
  [
    "user",
    "I'm planning a trip to Lisbon in May. I'm vegetarian, so food tips should be meat-free.",
    "2024-05-01T08:00:00.500Z",
  ],
  [
    "assistant",
    "May is a lovely time for Lisbon: warm days, few crowds. For vegetarian food, try the petiscos at Ao 26.",
    "2024-05-01T08:01:10.750Z",
  ],
  // The image part has no text; the text part is the turn.
  [
    "user",
    "Here's a photo of the yellow tram by the cathedral: which line is it?",
    "2024-05-01T08:03:20.500Z",
  ],
  [
    "assistant",
    "That's tram 28, which climbs through Alfama past the Sé cathedral.",
    "2024-05-01T08:03:40.250Z",
  ],
  ["user", "How many dollars is 120 euros? Work it out.", "2024-05-01T08:05:00.500Z"],
  // Code the assistant ran is a fenced block; the tool's output that followed is skipped.
  ["assistant", "```\nrate = 1.08\nprint(round(120 * rate, 2))\n```", "2024-05-01T08:05:10.500Z"],
  [
    "assistant",
    "120 euros is about 129.60 dollars at 1.08:\n\n```python\nrate = 1.08\nprint(round(120 * rate, 2))  # 129.6\n```",
    "2024-05-01T08:05:20.500Z",
  ],
];
const peanuts = [
  ["user", "Please remember that I'm allergic to peanuts.", "2023-01-01T12:00:00.500Z"],
  ["assistant", "Noted: no peanuts in any recipe I suggest.", "2023-01-01T12:00:10.500Z"],
];

describe("importing a ChatGPT export", () => {
  it("stores the shown branch of each conversation once, with its times, and nothing on a re-import", async () => {
    // The file's conversations as they are, in one import …
    const first = await client.importConversations({
      userId: "ada",
      format: "chatgpt-export",
      conversations: JSON.parse(chatgptFile),
      infer: false,
    });
    // Two hidden system messages (ChatGPT's own, custom instructions) and the tool's output.
    assert.deepEqual(await finished([first.job]), { created: 9, existing: 0, skipped: 3 });
    assert.deepEqual(await session("ada", "import:6650b1f2-0c4d-8001-a1b2-4c1e5d6f7a8b"), lisbon);
    assert.deepEqual(await session("ada", "import:63b1a2c4-1111-4e2f-9a3b-5c6d7e8f9a0b"), peanuts);
    // … and the file again through the client's splitter: the same turns, nothing new.
    const again = await client.importExport({ userId: "ada", format: "chatgpt-export", export: chatgptFile });
    assert.equal(again.jobs.length, 1);
    assert.deepEqual(await finished(again.jobs), { created: 0, existing: 9, skipped: 3 });
    const stored = [
      ...(await session("ada", "import:6650b1f2-0c4d-8001-a1b2-4c1e5d6f7a8b")),
      ...(await session("ada", "import:63b1a2c4-1111-4e2f-9a3b-5c6d7e8f9a0b")),
    ];
    assert.deepEqual(stored, [...lisbon, ...peanuts]);
    // No turn of the regenerated answer or the edited question, nor the hidden ones.
    const text = JSON.stringify(stored);
    for (const abandoned of ["Regenerated away", "Edited away", "I live in Porto", '129.6"']) {
      assert.ok(!text.includes(abandoned), abandoned);
    }
  });
});

describe("importing a ChatGPT export: a hostile tree", () => {
  it("refuses a loop in the parent links or a missing current_node, naming the conversation", async () => {
    const before = (await client.listJobs({ type: "import", limit: 200 })).jobs.length;
    const node = (parent: string | null, text: string) => ({
      parent,
      message: { author: { role: "user" }, content: { content_type: "text", parts: [text] }, create_time: 1 },
    });
    const loop = {
      id: "looping",
      mapping: { a: node("c", "one"), b: node("a", "two"), c: node("b", "three") },
      current_node: "c",
    };
    const missing = { id: "lost-node", mapping: { a: node(null, "one") }, current_node: "zz" };
    const dangling = { id: "dangling", mapping: { a: node("gone", "one") }, current_node: "a" };
    for (const [conversation, says] of [
      [loop, /conversation "looping": its parent links loop back to node "c"/],
      [missing, /conversation "lost-node": its current_node "zz" is not in its mapping/],
      [dangling, /conversation "dangling": node "a" names a parent "gone" that is not in its mapping/],
    ] as const) {
      for (const call of [
        () =>
          client.importConversations({
            userId: "ada",
            format: "chatgpt-export",
            conversations: [conversation],
          }),
        () => client.importExport({ userId: "ada", format: "chatgpt-export", export: [conversation] }),
      ]) {
        await assert.rejects(call(), (error: unknown) => {
          assert.ok(MemoryError.isInstance(error));
          assert.equal(error.code, "invalid_input");
          assert.match(error.message, says);
          return true;
        });
      }
    }
    assert.equal((await client.listJobs({ type: "import", limit: 200 })).jobs.length, before);
  });

  it("walks a 50,000-node branch without recursion, and refuses a 50,000-node loop", async () => {
    const depth = 50_000;
    const mapping: ChatgptConversation["mapping"] = {};
    for (let index = 0; index < depth; index += 1) {
      const shown = index === depth - 1;
      mapping[`n${index}`] = {
        parent: index === 0 ? null : `n${index - 1}`,
        message: shown
          ? {
              author: { role: "user" },
              content: { content_type: "text", parts: ["At the bottom."] },
              create_time: 2,
            }
          : null,
      };
    }
    const deep: ChatgptConversation = { id: "deep", mapping, current_node: `n${depth - 1}` };
    const { job } = await client.importConversations({
      userId: "deep",
      format: "chatgpt-export",
      conversations: [deep],
      infer: false,
    });
    assert.deepEqual(await finished([job]), { created: 1, existing: 0, skipped: 0 });
    assert.deepEqual(await session("deep", "import:deep"), [
      ["user", "At the bottom.", "1970-01-01T00:00:02.000Z"],
    ]);
    (mapping.n0 as { parent: string | null }).parent = `n${depth - 1}`;
    await assert.rejects(
      client.importConversations({ userId: "deep", format: "chatgpt-export", conversations: [deep] }),
      /conversation "deep": its parent links loop back to node "n49999"/,
    );
  });
});

describe("importing a ChatGPT export past one import's limits", () => {
  it("cuts an export past one import's limits into imports that store what one would", async () => {
    const turns = 260;
    const mapping: Record<string, unknown> = { root: { parent: null, message: null } };
    const conversations = [];
    for (let index = 0; index < turns; index += 1) {
      const text = `Turn ${index}: ${"lisbon tram pastel de nata ".repeat(700)}`;
      mapping[`m${index}`] = {
        parent: index === 0 ? "root" : `m${index - 1}`,
        message: {
          author: { role: index % 2 === 0 ? "user" : "assistant" },
          content: { content_type: "text", parts: [text] },
          create_time: 1714550400 + index,
          metadata: { model_slug: "gpt-4o", citations: [], content_references: [] },
        },
      };
    }
    conversations.push({ id: "long", title: "Long", mapping, current_node: `m${turns - 1}` });
    for (let index = 0; index < 3; index += 1) {
      conversations.push({
        id: `short-${index}`,
        mapping: {
          only: {
            parent: null,
            message: {
              author: { role: "user" },
              content: { content_type: "text", parts: [`Short ${index}`] },
            },
          },
        },
        current_node: "only",
      });
    }
    const exported = JSON.stringify(conversations);
    assert.ok(Buffer.byteLength(exported) > IMPORT_LIMITS.bytes);
    const parts = splitChatExport("chatgpt-export", exported);
    assert.ok(parts.length >= 2, `${parts.length} parts`);
    for (const part of parts) {
      const body = JSON.stringify({ userId: "long", format: "chatgpt-export", conversations: part });
      assert.ok(Buffer.byteLength(body) <= IMPORT_LIMITS.bytes);
      assert.ok(importConversationsRequestSchema.safeParse(JSON.parse(body)).success);
    }
    const { jobs } = await client.importExport({
      userId: "long",
      format: "chatgpt-export",
      export: exported,
      infer: false,
    });
    assert.equal(jobs.length, parts.length);
    assert.deepEqual(await finished(jobs), { created: turns + 3, existing: 0, skipped: 0 });
    const events: unknown[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.recallConversation({
        userId: "long",
        sessionId: "import:long",
        order: "asc",
        limit: 200,
        ...(cursor === undefined ? {} : { cursor }),
      });
      events.push(...page.events.map((event) => event.content.slice(0, event.content.indexOf(":"))));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    assert.deepEqual(
      events,
      Array.from({ length: turns }, (_, index) => `Turn ${index}`),
    );
    // The whole conversation in one in-process import would name the same turns: nothing new.
    const again = await client.importExport({
      userId: "long",
      format: "chatgpt-export",
      export: exported,
      infer: false,
    });
    assert.deepEqual(await finished(again.jobs), { created: 0, existing: turns + 3, skipped: 0 });
  });
});

describe("importing a Claude export", () => {
  it("stores each chat message once, with its time, text blocks only, and nothing on a re-import", async () => {
    const first = await client.importConversations({
      userId: "grace",
      format: "claude-export",
      conversations: JSON.parse(claudeFile),
      infer: false,
    });
    assert.deepEqual(await finished([first.job]), { created: 3, existing: 0, skipped: 0 });
    const expected = [
      [
        "user",
        "I feed my sourdough starter at 7am and 7pm. Can you plan a Saturday bake around that?",
        "2024-06-02T09:15:30.250Z",
      ],
      [
        "assistant",
        "Mix the dough at 11am, when the 7am feed peaks, then bulk ferment until about 4pm.\n\nShape at 4pm, cold-retard overnight, and bake Sunday at 8am.",
        "2024-06-02T09:15:52.750Z",
      ],
      ["user", "Great. My oven only goes up to 230C, by the way.", "2024-06-02T09:20:41.512Z"],
    ];
    assert.deepEqual(await session("grace", "import:1c7f3a9e-5b2d-4e8a-9c1f-0d3e5a7b9c2e"), expected);
    const again = await client.importExport({ userId: "grace", format: "claude-export", export: claudeFile });
    assert.deepEqual(await finished(again.jobs), { created: 0, existing: 3, skipped: 0 });
    assert.deepEqual(await session("grace", "import:1c7f3a9e-5b2d-4e8a-9c1f-0d3e5a7b9c2e"), expected);
  });
});
