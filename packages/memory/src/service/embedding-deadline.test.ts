/**
 * The service's wait for its embedding model has a deadline: a model that never answers fails the
 * operation `unavailable` (retryable) at `embeddingTimeoutMs`, and the model's abort signal is aborted,
 * instead of holding the request (and its HTTP connection) forever.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { MemoryError } from "../errors/memory-error.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createHashingTestEmbedder } from "../testing/create-hashing-test-embedder.ts";
import { createMemoryService } from "./create-memory-service.ts";

/** The hashing embedder, until `stall()`: then every call waits until its signal aborts (or forever); `resume()` answers again. */
function stallingEmbedder() {
  const inner = createHashingTestEmbedder();
  let stalled = false;
  const signals: (AbortSignal | undefined)[] = [];
  const model: EmbeddingModelV4 = {
    ...inner,
    async doEmbed(options) {
      if (!stalled) return inner.doEmbed(options);
      signals.push(options.abortSignal);
      return new Promise(() => {});
    },
  };
  return {
    model,
    signals,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
    },
  };
}

it("a model that never answers fails search and add unavailable at the deadline, its signal aborted", async () => {
  const embedder = stallingEmbedder();
  const service = createMemoryService({
    store: createSqliteStore({ path: ":memory:" }),
    embeddingModel: embedder.model,
    embeddingTimeoutMs: 200,
  });
  try {
    await service.add("t", { userId: "u", content: "I play the cello on Sundays" });
    embedder.stall();
    for (const operation of [
      () => service.search("t", { userId: "u", query: "cello" }),
      () => service.add("t", { userId: "u", content: "I live in Lisbon" }),
    ]) {
      const started = performance.now();
      await assert.rejects(operation(), (error: unknown) => {
        assert.ok(MemoryError.isInstance(error), String(error));
        assert.equal(error.code, "unavailable");
        assert.equal(error.retryable, true);
        assert.match(error.message, /embedding model .* did not answer within 200 ms/);
        return true;
      });
      const took = performance.now() - started;
      assert.ok(took >= 180 && took < 1500, `failed after ${Math.round(took)} ms`);
    }
    assert.ok(embedder.signals.length >= 2);
    assert.ok(
      embedder.signals.every((signal) => signal?.aborted === true),
      "the model's signal was aborted",
    );
    // The failed add stored nothing; with the model back, the service answers again.
    embedder.resume();
    assert.equal((await service.search("t", { userId: "u", query: "Lisbon" })).results.length, 0);
    assert.equal((await service.search("t", { userId: "u", query: "cello" })).results.length, 1);
  } finally {
    await service.close();
  }
});
