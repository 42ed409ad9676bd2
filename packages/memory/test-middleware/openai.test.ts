import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { underLoadMs } from "@tackle/test-support";
import OpenAI from "openai";
import { createOpenAIMiddleware } from "../src/openai/index.ts";
import { type MemoryFixture, startMemoryFixture } from "./support/start-memory-fixture.ts";
import { type OpenAIWireServer, startOpenAIWireServer } from "./support/start-openai-wire-server.ts";

// The hosted model is the only stand-in: a scripted server on loopback speaking the OpenAI wire format.
let memory: MemoryFixture;
let wire: OpenAIWireServer;

/** The system text a request carried (chat messages or responses input items). */
function systemOf(body: Record<string, unknown>): string {
  const items = (body.messages ?? body.input ?? []) as { role?: string; content?: unknown }[];
  return items
    .filter((item) => item.role === "system")
    .map((item) => String(item.content))
    .join("\n");
}

function lastUserOf(body: Record<string, unknown>): string {
  const items = (body.messages ?? body.input ?? []) as { role?: string; content?: unknown }[];
  return String(items.findLast((item) => item.role === "user")?.content ?? "");
}

before(async () => {
  memory = await startMemoryFixture();
  await memory.service.add("acme", {
    userId: "alice",
    content: "I like green tea with jasmine",
    kind: "preference",
  });
  await memory.service.add("acme", {
    userId: "bob",
    content: "I drink black coffee every morning",
    kind: "preference",
  });
  wire = await startOpenAIWireServer((body) => {
    const system = systemOf(body);
    const saw = `${system.includes("green tea") ? "tea" : ""}${system.includes("black coffee") ? "coffee" : ""}`;
    return `${lastUserOf(body)} -> ${saw || "nothing"}`;
  });
});
after(async () => {
  await wire.close();
  await memory.close();
});

function remembering(openai: OpenAI, userId: string, sessionId: string) {
  return createOpenAIMiddleware(openai, {
    client: memory.client("acme"),
    userId,
    sessionId,
    awaitCapture: true,
    // These tests check what is injected, under a loaded test machine; the deadline has its own test
    // (stall.test.ts). 10 s on a quiet machine, scaled by the load.
    contextTimeoutMs: underLoadMs(10_000),
  });
}

describe("createOpenAIMiddleware with the real openai client over HTTP: chat and responses", () => {
  it("chat.completions.create: injects, answers, captures; withResponse still works", async () => {
    const openai = new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 });
    const client = remembering(openai, "alice", "chat");
    const { data, response, request_id } = await client.chat.completions
      .create({
        model: "scripted",
        messages: [
          { role: "developer", content: "Be brief." },
          { role: "user", content: "Which tea?" },
        ],
      })
      .withResponse();
    assert.equal(data.choices[0]!.message.content, "Which tea? -> tea");
    assert.equal(response.status, 200);
    assert.equal(request_id, "req_scripted");
    const sent = wire.requests.at(-1)!.body as { messages: { role: string; content: string }[] };
    assert.deepEqual(
      sent.messages.map((message) => message.role),
      ["developer", "system", "user"],
    );
    assert.match(sent.messages[1]!.content, /^The block below is long-term memory/);
    assert.match(sent.messages[1]!.content, /<<<END_UNTRUSTED_MEMORY_CONTEXT nonce=[0-9a-f]{32}>>>$/);
    assert.deepEqual(
      (await memory.events("acme", "alice", "chat")).map((event) => [event.role, event.content]),
      [
        ["user", "Which tea?"],
        ["assistant", "Which tea? -> tea"],
      ],
    );
    assert.equal(
      openai.chat.completions.create,
      OpenAI.Chat.Completions.prototype.create,
      "the caller's client is untouched",
    );
    assert.equal(Object.hasOwn(openai.chat.completions, "create"), false);
  });

  it("chat.completions.create with stream: true captures when the stream ends", async () => {
    const client = remembering(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      "bob",
      "chat-stream",
    );
    const stream = await client.chat.completions.create({
      model: "scripted",
      stream: true,
      messages: [{ role: "user", content: "Morning drink?" }],
    });
    assert.ok(typeof stream.tee === "function", "still the SDK's Stream");
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Morning drink? -> coffee");
    assert.deepEqual(
      (await memory.events("acme", "bob", "chat-stream")).map((event) => [event.role, event.content]),
      [
        ["user", "Morning drink?"],
        ["assistant", "Morning drink? -> coffee"],
      ],
    );
  });

  it("a stream the caller stops reading is not captured", async () => {
    const client = remembering(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      "bob",
      "abandoned",
    );
    const stream = await client.chat.completions.create({
      model: "scripted",
      stream: true,
      messages: [{ role: "user", content: "one two three four five" }],
    });
    for await (const _chunk of stream) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(await memory.events("acme", "bob", "abandoned"), []);
  });

  it("responses.create, plain and streamed", async () => {
    const client = remembering(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      "alice",
      "responses",
    );
    const response = await client.responses.create({ model: "scripted", input: "Tea please?" });
    assert.equal(response.output_text, "Tea please? -> tea");
    const sent = wire.requests.at(-1)!.body as { input: { role: string }[] };
    assert.deepEqual(
      sent.input.map((item) => item.role),
      ["system", "user"],
    );
    const stream = await client.responses.create({
      model: "scripted",
      input: [{ role: "user", content: "Again?" }],
      stream: true,
    });
    let text = "";
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta;
    assert.equal(text, "Again? -> tea");
    assert.deepEqual(
      (await memory.events("acme", "alice", "responses")).map((event) => [event.role, event.content]),
      [
        ["user", "Tea please?"],
        ["assistant", "Tea please? -> tea"],
        ["user", "Again?"],
        ["assistant", "Again? -> tea"],
      ],
    );
  });
});

describe("createOpenAIMiddleware with the real openai client: users, double reads, failures, retries", () => {
  it("two users interleaved through one OpenAI client: no bundle or capture crosses", async () => {
    const openai = new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 });
    const clients = {
      alice: remembering(openai, "alice", "interleaved"),
      bob: remembering(openai, "bob", "interleaved"),
    };
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, index) => {
        const userId = index % 2 === 0 ? "alice" : "bob";
        const content = `question ${index} from ${userId}`;
        const client = clients[userId];
        if (index % 4 < 2) {
          const completion = await client.chat.completions.create({
            model: "scripted",
            messages: [{ role: "user", content }],
          });
          return { userId, content, text: completion.choices[0]!.message.content };
        }
        const stream = await client.chat.completions.create({
          model: "scripted",
          stream: true,
          messages: [{ role: "user", content }],
        });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        return { userId, content, text };
      }),
    );
    for (const { userId, content, text } of results) {
      assert.equal(text, `${content} -> ${userId === "alice" ? "tea" : "coffee"}`);
    }
    for (const userId of ["alice", "bob"]) {
      const events = await memory.events("acme", userId, "interleaved");
      assert.equal(events.length, 20);
      for (const event of events) assert.match(event.content, new RegExp(`from ${userId}`));
    }
  });

  it("reading one call both ways captures it once and returns the same data", async () => {
    const client = remembering(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      "bob",
      "both-ways",
    );
    const pending = client.chat.completions.create({
      model: "scripted",
      messages: [{ role: "user", content: "Twice?" }],
    });
    const [awaited, { data }] = await Promise.all([pending, pending.withResponse()]);
    assert.equal(awaited, data);
    assert.equal((await memory.events("acme", "bob", "both-ways")).length, 2);
  });

  it("degrades when the memory service is unreachable: the request still goes through, onError hears why", async () => {
    const reported: string[] = [];
    const client = createOpenAIMiddleware(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      {
        apiUrl: "http://127.0.0.1:9",
        apiKey: "nobody",
        clientOptions: { allowPrivateNetwork: true, maxRetries: 0, timeoutMs: 2000 },
        userId: "alice",
        awaitCapture: true,
        onError: (error) => reported.push(error.code),
      },
    );
    const completion = await client.chat.completions.create({
      model: "scripted",
      messages: [{ role: "user", content: "Hello?" }],
    });
    assert.equal(completion.choices[0]!.message.content, "Hello? -> nothing");
    assert.deepEqual(reported, ["memory_context_failed", "memory_capture_failed"]);
    const sent = wire.requests.at(-1)!.body as { messages: { role: string }[] };
    assert.deepEqual(
      sent.messages.map((message) => message.role),
      ["user"],
    );
  });

  it("a retried request is captured once", async () => {
    const client = remembering(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      "alice",
      "retry",
    );
    for (let attempt = 0; attempt < 3; attempt++) {
      await client.chat.completions.create({
        model: "scripted",
        messages: [{ role: "user", content: "Same question" }],
      });
    }
    assert.equal((await memory.events("acme", "alice", "retry")).length, 2);
  });
});
