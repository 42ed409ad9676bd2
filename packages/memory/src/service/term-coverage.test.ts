import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { rankedConversation } from "../../test/support/ranked-conversation.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";
import { createScopeSnapshots, searchSnapshot } from "./scope-snapshot.ts";
import { scaleByCoverage, termCoverage } from "./term-coverage.ts";
import { queryTerms } from "./text.ts";

const memory = (id: string, content: string) =>
  ({ id, content, createdAt: "2024-01-01T00:00:00Z" }) as StoredMemory;

it("coverage counts the question's words as the index matches them: stems, prefixes, repeats once", () => {
  const turn = memory("a", "Ollie: the builders finally started on the kitchen, kitchen, KITCHEN");
  assert.equal(termCoverage(turn, ["kitchen", "builder"]), 1, "a stem matches its plural");
  assert.equal(termCoverage(turn, ["kitchen", "kitchen", "roof"]), 0.5, "a repeated term counts once");
  assert.equal(termCoverage(turn, ["build*", "roof"]), 0.5, "a prefix term");
  assert.equal(termCoverage(turn, ["!!!"]), 0, "no word, no coverage");
});

it("the turn that holds several of a question's words leads one repeating one of them", async () => {
  const turns = [
    "Nadia: the dog, the dog, the dog. the dog is driving me mad",
    "Ollie: a walk might help",
    "Nadia: took the dog on a long walk by the canal this morning",
    "Ollie: a walk, nice. I need a walk too",
    "Nadia: the walk was grim, it rained",
    "Ollie: grim",
  ];
  const conversation = await rankedConversation(turns, "2024-03-01T18:00:00Z");
  const first = (coverage: boolean) =>
    conversation.first("Has Nadia been out walking with the dog?", { coverage, neighbours: false });
  assert.equal(await first(false), turns[0], "BM25 alone: the turn saying 'dog' four times leads");
  assert.equal(await first(true), turns[2], "with coverage: the turn holding dog and walk leads");
  await conversation.close();
});

it("coverage only reorders: every hit kept, scaled by the square root of its share, never above its score", () => {
  const words = ["dog", "house", "sold", "leeds", "grim", "dad", "kitchen", "roof"];
  fc.assert(
    fc.property(
      fc.subarray(words, { minLength: 1 }),
      fc.array(
        fc.record({
          text: fc.array(fc.constantFrom(...words, "the", "and"), { minLength: 1, maxLength: 8 }),
          score: fc.double({ min: 0.01, max: 20, noNaN: true }),
        }),
        { minLength: 1, maxLength: 50 },
      ),
      (query, drawn) => {
        const hits = drawn.map(({ text, score }, index) => ({
          memory: memory(`m${index}`, text.join(" ")),
          score,
        }));
        const terms = queryTerms(query.join(" "));
        const scaled = scaleByCoverage(hits, terms);
        assert.equal(scaled.length, hits.length);
        const byId = new Map(scaled.map((hit) => [hit.memory.id, hit.score]));
        for (const hit of hits) {
          // The oracle: the share of the query's words among the text's words, floored at one word.
          const own = new Set(hit.memory.content.split(" "));
          const share = terms.filter((term) => own.has(term)).length / terms.length;
          const factor = terms.length < 2 ? 1 : Math.sqrt(Math.max(share, 1 / terms.length));
          assert.ok(Math.abs(byId.get(hit.memory.id)! - hit.score * factor) < 1e-9, hit.memory.content);
        }
        if (terms.length < 2) return;
        for (let index = 1; index < scaled.length; index += 1)
          assert.ok(scaled[index - 1]!.score >= scaled[index]!.score, "sorted by score");
      },
    ),
    { numRuns: 2_000 },
  );
});

it("the in-process search counts the words a hit holds as coverage counts them (against the tokens)", async () => {
  const vocabulary = ["walk", "walks", "walked", "walking", "dog", "dogs", "house", "houses", "sold"];
  const extra = ["Leeds", "kitchen", "roofs", "grim", "dad's", "café", "the", "a", "2024"];
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store });
  // A fixed corpus drawn once: 300 turns of 1–12 words, inflections and stop words among them.
  const words = [...vocabulary, ...extra];
  const turns = fc.sample(fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 12 }), {
    numRuns: 300,
    seed: 26,
  });
  await service.addBatch("t", {
    userId: "u",
    memories: turns.map((turn) => ({ kind: "episode" as const, content: turn.join(" ") })),
  });
  const snapshot = await createScopeSnapshots(store).get("t", { userId: "u" });
  assert.equal(snapshot?.memories.length, 300, "the scope is kept in process");
  let checked = 0;
  fc.assert(
    fc.property(fc.subarray(words, { minLength: 1, maxLength: 6 }), (query) => {
      const terms = queryTerms(query.join(" "));
      const distinct = new Set(terms).size;
      for (const hit of searchSnapshot(snapshot, terms, { limit: 300 })) {
        assert.equal(hit.held / distinct, termCoverage(hit.memory, terms), hit.memory.content);
        checked += 1;
      }
    }),
    { numRuns: 2_000 },
  );
  assert.ok(checked > 100_000, `hits checked: ${checked}`);
  await service.close();
});
