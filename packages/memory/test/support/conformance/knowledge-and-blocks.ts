/** Store conformance. Knowledge documents, core-memory blocks, the profile and context bundle. */
import assert from "node:assert/strict";
import type { MemoryError } from "@tackle/memory";
import { type ConformanceCases, rejectsWithCode } from "./cases.ts";

export const knowledgeAndBlocksCases: ConformanceCases = {
  "knowledge base: chunked ingest is idempotent and searchable, only in its tenant": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const content = `${"Intro paragraph about the handbook. ".repeat(20)}\n\nRefunds are processed within fourteen days of the return.\n\n${"Closing words. ".repeat(30)}`;
    const first = await service.ingestDocument(t, { title: "Handbook", content, chunkSize: 300 });
    assert.equal(first.created, true);
    assert.ok(first.document.chunkCount >= 3);
    const again = await service.ingestDocument(t, { title: "Handbook", content, chunkSize: 300 });
    assert.equal(again.created, false);
    assert.equal(again.document.id, first.document.id);
    const found = await service.searchKnowledge(t, {
      wholeTenant: true,
      query: "how long do refunds take",
    });
    assert.match(found.results[0]?.content ?? "", /Refunds are processed/);
    assert.equal(found.results[0]?.title, "Handbook");
    assert.equal(
      (await service.searchKnowledge(tenant(), { wholeTenant: true, query: "refunds" })).results.length,
      0,
    );
  },
  "self-edit: append, exact replace, clear errors with capacity, all-or-nothing batches": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const scope = { agentId: "agent-1", userId: "u" };
    const read = await service.selfEdit(t, { ...scope, edits: [] });
    assert.deepEqual(
      read.blocks.map((block) => [block.label, block.remaining]),
      [
        ["human", 2000],
        ["persona", 2000],
      ],
    );
    const appended = await service.selfEdit(t, {
      ...scope,
      edits: [{ op: "append", label: "human", text: "Name: Ada" }],
    });
    assert.equal(
      appended.blocks.find((block) => block.label === "human")?.remaining,
      2000 - "Name: Ada".length,
    );
    await rejectsWithCode(
      service.selfEdit(t, {
        ...scope,
        edits: [{ op: "replace", label: "human", oldText: "Name: Bob", newText: "x" }],
      }),
      "edit_no_match",
      422,
    );
    await assert.rejects(
      service.selfEdit(t, {
        ...scope,
        edits: [{ op: "append", label: "persona", text: "x".repeat(2001) }],
      }),
      (error: MemoryError) => {
        assert.equal(error.code, "capacity_exceeded");
        const data = error.data as { blocks: { label: string; remaining: number }[] };
        assert.ok(data.blocks.some((block) => block.label === "persona" && block.remaining === 2000));
        return true;
      },
    );
    await rejectsWithCode(
      service.selfEdit(t, {
        ...scope,
        edits: [
          { op: "append", label: "persona", text: "I am helpful" },
          { op: "replace", label: "human", oldText: "missing", newText: "x" },
        ],
      }),
      "edit_no_match",
    );
    const unchanged = await service.selfEdit(t, { ...scope, edits: [] });
    assert.equal(
      unchanged.blocks.find((block) => block.label === "persona")?.value,
      "",
      "the failed batch left nothing",
    );
    const replaced = await service.selfEdit(t, {
      ...scope,
      edits: [{ op: "replace", label: "human", oldText: "Ada", newText: "Ada Lovelace" }],
    });
    assert.equal(replaced.blocks.find((block) => block.label === "human")?.value, "Name: Ada Lovelace");
    await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        service.selfEdit(t, {
          ...scope,
          edits: [{ op: "append", label: "persona", text: `line ${index}` }],
        }),
      ),
    );
    const persona = (await service.selfEdit(t, { ...scope, edits: [] })).blocks.find(
      (block) => block.label === "persona",
    );
    assert.equal(persona?.value.split("\n").length, 6, "concurrent appends all land");
  },
  "profile and context bundle stay within the token budget": async ({ service, tenant }) => {
    const t = tenant();
    await service.add(t, { userId: "u", kind: "preference", content: "Prefers window seats on flights" });
    await service.add(t, { userId: "u", kind: "fact", content: "Works as a marine biologist in Bergen" });
    await service.writeEvent(t, {
      userId: "u",
      sessionId: "s",
      role: "user",
      content: "Book me a flight to Bergen",
      infer: false,
    });
    const { profile } = await service.profile(t, { userId: "u" });
    assert.deepEqual(profile.preferences, ["Prefers window seats on flights"]);
    assert.equal(profile.generatedBy, "deterministic");
    const bundle = await service.contextBundle(t, { userId: "u", query: "flight seats" });
    assert.ok(bundle.memories.some((memory) => memory.content.includes("window seats")));
    assert.equal(bundle.recentEvents.at(-1)?.content, "Book me a flight to Bergen");
    assert.ok(bundle.tokenEstimate <= bundle.tokenBudget);
    await service.writeEvent(t, {
      userId: "u",
      sessionId: "s",
      role: "assistant",
      content: "Sure. ".repeat(60),
      infer: false,
    });
    const tight = await service.contextBundle(t, { userId: "u", query: "flight seats", tokenBudget: 50 });
    assert.ok(tight.tokenEstimate <= 50);
    assert.equal(tight.truncated, true);
  },
};
