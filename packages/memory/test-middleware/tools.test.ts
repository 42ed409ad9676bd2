import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createToolSet, type ToolSet } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { MEMORY_SCOPE_VALUES } from "../src/scope/memory-scope.ts";
import { TOOL_RESULT_TOKEN_BUDGET } from "../src/tools/compact-results.ts";
import { createMemoryTools } from "../src/tools/create-memory-tools.ts";
import { type MemoryFixture, startMemoryFixture } from "./support/start-memory-fixture.ts";

let memory: MemoryFixture;
let tools: ToolSet;
before(async () => {
  memory = await startMemoryFixture();
  tools = createToolSet(createMemoryTools(memory.client("acme")));
});
after(() => memory.close());

// biome-ignore lint/suspicious/noExplicitAny: tool outputs are read loosely in assertions
const call = (name: string, args: unknown, identity?: Record<string, string>): Promise<any> =>
  tools.invoke(name, args, identity === undefined ? {} : { identity });

describe("createMemoryTools against the real service: the tool list", () => {
  it("has the 27 memory tools, memory_ prefixed, with scope fields from MEMORY_SCOPE_VALUES", () => {
    assert.deepEqual([...tools.names].sort(), [
      "memory_add",
      "memory_admin_access_summaries",
      "memory_admin_access_trends",
      "memory_admin_get_trace",
      "memory_admin_list_traces",
      "memory_build_context_bundle",
      "memory_chain_trace",
      "memory_consolidate",
      "memory_feedback",
      "memory_get_job",
      "memory_import_conversations",
      "memory_lifecycle_delete",
      "memory_lifecycle_get",
      "memory_lifecycle_history",
      "memory_lifecycle_update",
      "memory_list",
      "memory_list_jobs",
      "memory_novelty_scan",
      "memory_procedure_outcome",
      "memory_profile",
      "memory_recall_conversation",
      "memory_search",
      "memory_search_kb",
      "memory_self_edit",
      "memory_state_unified",
      "memory_status",
      "memory_write_event",
    ]);
    for (const name of ["memory_search", "memory_add", "memory_build_context_bundle", "memory_list_jobs"]) {
      const properties = Object.keys((tools.get(name)!.inputJsonSchema as { properties: object }).properties);
      for (const field of MEMORY_SCOPE_VALUES) assert.ok(properties.includes(field), `${name} has ${field}`);
    }
    for (const tool of tools.tools) assert.ok(tool.description.length > 20, `${tool.name} says what it does`);
  });

  it("the 27 definitions fit in 3k tokens (o200k), and every scope field says what it is", () => {
    let total = 0;
    for (const tool of tools.tools) {
      total += countTokens(
        JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.inputJsonSchema }),
      );
      const walk = (schema: unknown): void => {
        if (typeof schema !== "object" || schema === null) return;
        const properties = (schema as { properties?: Record<string, { description?: string }> }).properties;
        for (const [name, property] of Object.entries(properties ?? {})) {
          if ((MEMORY_SCOPE_VALUES as readonly string[]).includes(name)) {
            assert.ok(property.description, `${tool.name}: ${name} has no description`);
          }
        }
        for (const value of Object.values(schema)) walk(value);
      };
      walk(tool.inputJsonSchema);
    }
    assert.ok(total <= 3000, `the definitions take ${total} tokens`);
  });
});

describe("createMemoryTools against the real service: a memory's lifecycle", () => {
  it("drives a memory through its whole lifecycle", async () => {
    const alice = { userId: "alice" };
    const added = await call("memory_add", {
      ...alice,
      content: "Alice prefers aisle seats on long flights",
      kind: "preference",
    });
    assert.equal(added.created, true);
    const id = added.id;
    assert.deepEqual(
      Object.keys(added).sort(),
      ["created", "date", "id", "kind", "text"],
      "a compact answer",
    );
    const again = await call("memory_add", {
      ...alice,
      content: "Alice prefers aisle seats on long flights",
    });
    assert.equal(again.created, false, "a duplicate is not stored twice");
    const episode = { ...alice, content: "Alice flew to Oslo on Monday", kind: "episode" };
    assert.equal((await call("memory_add", episode)).created, true);
    assert.equal(
      (await call("memory_add", episode)).created,
      false,
      "a model repeating the call means the same episode: the tool dedupes it",
    );

    const found = await call("memory_search", { ...alice, query: "aisle seats" });
    assert.equal(found.results[0].id, id);
    assert.deepEqual(Object.keys(found.results[0]).sort(), ["date", "id", "kind", "score", "text"]);
    assert.equal(
      (await call("memory_lifecycle_get", { id })).memory.content,
      "Alice prefers aisle seats on long flights",
    );

    const updated = await call("memory_lifecycle_update", {
      id,
      content: "Alice prefers aisle seats on every flight",
      reason: "she said so",
    });
    assert.equal(updated.memory.version, 2);
    const history = await call("memory_lifecycle_history", { id });
    assert.ok(JSON.stringify(history).includes("long flights"), "the old version stays in the history");

    const rated = await call("memory_feedback", { id, rating: "helpful", traceId: found.traceId });
    assert.equal(rated.memory.feedback.helpful, 1);
    assert.equal(
      (await call("memory_admin_get_trace", { id: found.traceId })).trace.id ?? found.traceId,
      found.traceId,
    );
    assert.ok((await call("memory_admin_list_traces", alice)).traces.length >= 1);

    const procedure = await call("memory_add", {
      ...alice,
      content: "To book travel, check the loyalty number first",
      kind: "procedure",
    });
    const outcome = await call("memory_procedure_outcome", { id: procedure.id, success: true });
    assert.equal(outcome.successRate, 1);

    const chain = await call("memory_chain_trace", { id });
    assert.ok(JSON.stringify(chain).includes(id));

    const deleted = await call("memory_lifecycle_delete", { id, reason: "test" });
    assert.equal(deleted.memory.status, "deleted");
    const after = await call("memory_search", { ...alice, query: "aisle seats" });
    assert.ok(after.results.every((result: { id: string }) => result.id !== id));
  });
});

describe("createMemoryTools against the real service: token budgets and writes once", () => {
  it("answers within a token budget: past it, how many were left out and a cursor that reads on", async () => {
    const dana = { userId: "dana" };
    const long = "the harbour lighthouse keeper logbook entry ".repeat(40);
    for (let index = 0; index < 12; index += 1) {
      await call("memory_add", { ...dana, content: `Entry ${index}: ${long}`, dedupe: false });
    }
    const first = await call("memory_search", { ...dana, query: "lighthouse logbook", limit: 12 });
    const tokens = countTokens(JSON.stringify(first.results));
    assert.ok(tokens <= TOOL_RESULT_TOKEN_BUDGET, `the answer holds ${tokens} tokens`);
    assert.ok(first.results.length >= 1 && first.results.length < 12, "the budget cut the list");
    assert.equal(first.more.omitted, 12 - first.results.length);
    const next = await call("memory_search", {
      ...dana,
      query: "lighthouse logbook",
      limit: 12,
      cursor: first.more.nextCursor,
    });
    const seen = new Set(first.results.map((result: { id: string }) => result.id));
    assert.ok(next.results.length >= 1);
    for (const result of next.results) assert.ok(!seen.has(result.id), "the cursor read on, not again");
    const full = await call("memory_search", { ...dana, query: "lighthouse", limit: 1, details: true });
    assert.ok(full.results[0].memory.provenance, "details: true answers the whole record");
  });

  it("lists a scope's memories a page at a time, within the token budget, the cursor reading on", async () => {
    const erin = { userId: "erin-list" };
    const long = "the orchard ledger of apple harvests by row and year ".repeat(30);
    for (let index = 0; index < 9; index += 1) {
      await call("memory_add", { ...erin, content: `Row ${index}: ${long}`, dedupe: false });
    }
    await call("memory_add", { userId: "frank-list", content: "Frank keeps bees behind the barn" });
    const seen: string[] = [];
    let page = await call("memory_list", { ...erin, limit: 9 });
    assert.ok(page.memories.length < 9, "the budget cut the first page");
    assert.equal(page.more.omitted, 9 - page.memories.length);
    assert.ok(countTokens(JSON.stringify(page.memories)) <= TOOL_RESULT_TOKEN_BUDGET);
    assert.deepEqual(Object.keys(page.memories[0]).sort(), ["date", "id", "kind", "text"]);
    assert.match(page.memories[0].text, /^Row 8:/, "the latest written first");
    for (;;) {
      seen.push(...page.memories.map((memory: { id: string }) => memory.id));
      if (page.nextCursor === undefined) break;
      page = await call("memory_list", { ...erin, limit: 9, cursor: page.nextCursor });
    }
    assert.equal(seen.length, 9, "every memory once");
    assert.equal(new Set(seen).size, 9);
    const full = await call("memory_list", { ...erin, limit: 1, details: true });
    assert.equal(full.memories[0].userId, "erin-list", "details: true answers the whole record");
    const bound = await tools.invoke(
      "memory_list",
      { userId: "erin-list", limit: 50 },
      { identity: { userId: "frank-list" } },
    );
    assert.deepEqual(
      (bound as { memories: { text: string }[] }).memories.map((memory) => memory.text),
      ["Frank keeps bees behind the barn"],
      "the identity's scope wins over the model's userId",
    );
  });

  it("writes events once per tool call, however often the call is retried", async () => {
    const event = { userId: "bob", sessionId: "s1", role: "user", content: "I moved to Lisbon last spring" };
    await tools.invoke("memory_write_event", event, { idempotencyKey: "call-42" });
    await tools.invoke("memory_write_event", event, { idempotencyKey: "call-42" });
    const recalled = await call("memory_recall_conversation", { userId: "bob", sessionId: "s1" });
    assert.equal(recalled.events.length, 1);
    assert.equal(recalled.events[0].text, "I moved to Lisbon last spring");
  });

  it("every write tool writes once per tool call: a retry under the call's key is answered, not counted again", async () => {
    const erin = { userId: "erin" };
    // biome-ignore lint/suspicious/noExplicitAny: tool outputs are read loosely in assertions
    const retried = async (name: string, args: unknown, idempotencyKey: string): Promise<any[]> => [
      await tools.invoke(name, args, { idempotencyKey }),
      await tools.invoke(name, args, { idempotencyKey }),
    ];
    const [added] = await retried("memory_add", { ...erin, kind: "episode", content: "Erin: sure!" }, "c-1");
    const [rated] = await retried("memory_feedback", { id: added.id, rating: "helpful" }, "c-2");
    assert.deepEqual(rated.memory.feedback, { helpful: 1, unhelpful: 0 });
    await retried("memory_procedure_outcome", { id: added.id, success: true }, "c-3");
    await retried(
      "memory_self_edit",
      { ...erin, edits: [{ op: "append", label: "human", text: "Erin." }] },
      "c-4",
    );
    const got = await call("memory_lifecycle_get", { id: added.id });
    assert.deepEqual(got.memory.feedback, { helpful: 1, unhelpful: 0 });
    assert.deepEqual(got.memory.outcomes, { successes: 1, failures: 0 });
    const edited = await call("memory_self_edit", { ...erin, edits: [] });
    const human = edited.blocks.find((block: { label: string }) => block.label === "human");
    assert.equal(human.value.split("Erin.").length - 1, 1, `appended once: ${human.value}`);
    // Another call (another key) is another write.
    await tools.invoke("memory_feedback", { id: added.id, rating: "helpful" }, { idempotencyKey: "c-5" });
    assert.equal((await call("memory_lifecycle_get", { id: added.id })).memory.feedback.helpful, 2);
  });
});

describe("createMemoryTools against the real service: the wider surface and identity", () => {
  it("serves the synthesis, knowledge and admin surface", async () => {
    const carol = { userId: "carol" };
    await call("memory_add", { ...carol, content: "Carol is allergic to peanuts", kind: "fact" });
    const edited = await call("memory_self_edit", {
      ...carol,
      edits: [{ op: "append", label: "human", text: "Name: Carol." }],
    });
    assert.ok(
      edited.blocks.some(
        (block: { label: string; value: string }) => block.label === "human" && block.value.includes("Carol"),
      ),
    );
    assert.ok((await call("memory_profile", carol)).profile.summary.includes("peanuts"));
    const bundle = await call("memory_build_context_bundle", {
      ...carol,
      query: "is carol allergic to peanuts",
    });
    assert.ok(bundle.memories.some((item: { content: string }) => item.content.includes("peanuts")));
    assert.ok((await call("memory_state_unified", carol)).counts.memories.active >= 1);
    assert.equal((await call("memory_status", {})).tenant, "acme");

    const novelty = await call("memory_novelty_scan", {
      ...carol,
      candidates: ["Carol is allergic to peanuts", "Carol plays the cello"],
    });
    assert.deepEqual(
      novelty.results.map((result: { novel: boolean }) => result.novel),
      [false, true],
    );

    await memory.client("acme").ingestDocument({
      ...carol,
      title: "Allergy card",
      content: "Peanut allergy: carry an epinephrine pen at all times.",
    });
    const kb = await call("memory_search_kb", { ...carol, query: "epinephrine" });
    assert.equal(kb.results[0].title, "Allergy card");

    const imported = await call("memory_import_conversations", {
      ...carol,
      format: "openai",
      conversations: [
        { sessionId: "old", messages: [{ role: "user", content: "I love hiking in the Alps" }] },
      ],
    });
    const job = await memory.client("acme").waitForJob(imported.job.id, { timeoutMs: underLoadMs(10_000) });
    assert.equal(job.status, "succeeded");
    assert.equal((await call("memory_get_job", { id: imported.job.id })).job.status, "succeeded");
    const consolidation = await call("memory_consolidate", carol);
    await memory.client("acme").waitForJob(consolidation.job.id, { timeoutMs: underLoadMs(10_000) });
    const jobs = await call("memory_list_jobs", carol);
    assert.ok(jobs.jobs.length >= 2);
    assert.ok(Array.isArray((await call("memory_admin_access_trends", carol)).days));
    assert.ok((await call("memory_admin_access_summaries", carol)).totals.memories >= 1);
  });

  it("binds the caller's identity: a model cannot reach another user's memory", async () => {
    const bobs = await call("memory_add", { userId: "bob", content: "Bob's door code is 4711" });
    const asAlice = { userId: "alice" };
    const search = await call("memory_search", { userId: "bob", query: "door code", details: true }, asAlice);
    assert.ok(
      search.results.every((result: { memory: { userId: string } }) => result.memory.userId === "alice"),
    );
    const refused = await tools.call("memory_lifecycle_get", { id: bobs.id }, { identity: asAlice });
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.error.code, "not_found");
    const deleted = await tools.call("memory_lifecycle_delete", { id: bobs.id }, { identity: asAlice });
    assert.equal(!deleted.ok && deleted.error.code, "not_found");
    assert.equal(
      (await call("memory_lifecycle_get", { id: bobs.id })).memory.status,
      "active",
      "nothing was lost",
    );
  });

  it("answers bad input with issues the model can act on, and stores nothing", async () => {
    const result = await tools.call("memory_add", { userId: "dave", content: "   ", kind: "rumour" });
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.error.code, "invalid_input");
    const paths = !result.ok
      ? (result.error.data as { issues: { path: string[] }[] }).issues.map((issue) => issue.path.join("."))
      : [];
    assert.deepEqual(paths.sort(), ["content", "kind"]);
    assert.equal((await call("memory_state_unified", { userId: "dave" })).counts.memories.active, 0);
  });
});
