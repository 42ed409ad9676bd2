import assert from "node:assert/strict";
import { it } from "node:test";
import type { LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { silentLogger } from "@tackle/core";
import { MockLanguageModelV4 } from "ai/test";
import type { StoredMemory } from "../store/memory-store.ts";
import { synthesizeProfile } from "./profile.ts";

// A mock stands in for the hosted language model (the AI SDK's own MockLanguageModelV4).
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

function text(value: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text: value }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}

function memory(kind: StoredMemory["kind"], content: string, importance = 0.5): StoredMemory {
  return {
    id: content,
    tenantId: "t",
    kind,
    content,
    metadata: {},
    provenance: { source: "api", eventIds: [], derivedFrom: [] },
    version: 1,
    status: "active",
    importance,
    feedback: { helpful: 0, unhelpful: 0 },
    outcomes: { successes: 0, failures: 0 },
    accessCount: 0,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    dedupeKey: content,
  };
}

const memories = [
  memory("preference", "Prefers aisle seats", 0.9),
  memory("fact", "Lives in Oslo"),
  memory("procedure", "Always confirm bookings by email"),
];

it("synthesizes a deterministic profile, most important first", async () => {
  const profile = await synthesizeProfile(memories, undefined, silentLogger);
  assert.equal(profile.generatedBy, "deterministic");
  assert.equal(
    profile.summary,
    "Preferences: Prefers aisle seats\nFacts: Lives in Oslo\nProcedures: Always confirm bookings by email",
  );
  assert.deepEqual(profile.memoryIds[0], "Prefers aisle seats");
});

it("lets a configured language model write the summary, and falls back when it fails", async () => {
  const prompts: string[] = [];
  const model = new MockLanguageModelV4({
    doGenerate: async (call) => {
      prompts.push(JSON.stringify(call.prompt));
      return text("A traveller in Oslo who likes aisle seats.");
    },
  });
  const improved = await synthesizeProfile(memories, model, silentLogger);
  assert.equal(improved.generatedBy, "language_model");
  assert.equal(improved.summary, "A traveller in Oslo who likes aisle seats.");
  assert.match(prompts[0] ?? "", /Prefers aisle seats/);
  assert.deepEqual(improved.preferences, ["Prefers aisle seats"]);

  const warnings: string[] = [];
  const failing = new MockLanguageModelV4({
    doGenerate: async () => {
      throw new Error("model down");
    },
  });
  const fallback = await synthesizeProfile(memories, failing, {
    ...silentLogger,
    warn: (message) => warnings.push(message),
  });
  assert.equal(fallback.generatedBy, "deterministic");
  assert.equal(warnings.length, 1, "the failure is reported, not swallowed");
});

it("answers the deterministic profile at its deadline when the language model never answers", async () => {
  const signals: (AbortSignal | undefined)[] = [];
  const silent = new MockLanguageModelV4({
    doGenerate: (call) => {
      signals.push(call.abortSignal);
      return new Promise(() => {});
    },
  });
  const warnings: string[] = [];
  const started = performance.now();
  const profile = await synthesizeProfile(
    memories,
    silent,
    { ...silentLogger, warn: (message) => warnings.push(message) },
    200,
  );
  const took = performance.now() - started;
  assert.ok(took >= 180 && took < 1500, `answered after ${Math.round(took)} ms`);
  assert.equal(profile.generatedBy, "deterministic");
  assert.equal(warnings.length, 1, "the timeout is reported");
  assert.ok(
    signals.length >= 1 && signals.every((signal) => signal?.aborted === true),
    "the model's call was aborted",
  );
});
