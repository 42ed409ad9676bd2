import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { createMemoryService } from "../service/create-memory-service.ts";
import { cosine, createEmbedder } from "../service/embedder.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createWordVectorEmbedder, wordVectorWeight } from "./index.ts";

const folder = mkdtempSync(join(tmpdir(), "tackle-word-vectors-"));
after(() => rmSync(folder, { recursive: true, force: true }));

const embed = async (model: EmbeddingModelV4, values: string[]) =>
  (await model.doEmbed({ values })).embeddings;

/** A file in the package's format: each vector is its values, its L2 norm, then its frequency rank. */
function vectorsFile(
  name: string,
  entries: Record<string, readonly number[]>,
  size = Object.keys(entries).length,
) {
  const vectors = Object.fromEntries(
    Object.entries(entries).map(([word, values], rank) => [word, [...values, Math.hypot(...values), rank]]),
  );
  const path = join(folder, name);
  const body = {
    precision: 8,
    l2NormIndex: 2,
    wordIndex: 3,
    size,
    dimensions: 2,
    words: Object.keys(entries),
  };
  writeFileSync(path, JSON.stringify({ ...body, vectors, unkVector: [0, 0] }));
  return path;
}

it("reads every word of the file, whatever its characters, and weighs frequent words down", async () => {
  // The words holding a quote and a bracket come before the ones looked up: a wrong split loses them.
  const path = vectorsFile("small.json", { the: [3, 4], '"': [1, 0], "]": [0, 1], job: [0, 2], gig: [2, 0] });
  const model = createWordVectorEmbedder({ path });
  const [job, gig, the, none] = await embed(model, ["job", "GIG!", "the", "zyzzyva 42"]);
  assert.ok(job![0] === 0 && job![1]! > 0, `job, its unit vector weighed: ${job}`);
  assert.ok(gig![1] === 0 && gig![0]! > 0, `gig, lowercased: ${gig}`);
  assert.ok(Math.hypot(...the!) < Math.hypot(...job!), `the most frequent word weighs less: ${the} ${job}`);
  assert.deepEqual(none, [0, 0], "a text of no known word is similar to nothing");
});

it("a file that is missing or does not hold what it says fails the embedding; the next one reads again", async () => {
  const path = join(folder, "later.json");
  const model = createWordVectorEmbedder({ path });
  await assert.rejects(embed(model, ["job"]), { code: "ENOENT" });
  vectorsFile("later.json", { job: [0, 2] });
  const [job] = await embed(model, ["job"]);
  assert.ok(job![0] === 0 && job![1]! > 0, `${job}`);
  const short = vectorsFile("short.json", { job: [0, 2] }, 2);
  await assert.rejects(
    embed(createWordVectorEmbedder({ path: short }), ["job"]),
    /1 word vectors read, the file says 2/,
  );
});

it("the packaged vectors know what BM25 cannot: a gig is work, ramen is not", async () => {
  const embedder = createEmbedder(createWordVectorEmbedder());
  const [question, gig, ramen] = await embedder.embed([
    "Where does Maya work?",
    "How is the new gig going, Maya?",
    "I had ramen with Lena yesterday.",
  ]);
  const [toGig, toRamen] = [cosine(question!, gig!), cosine(question!, ramen!)];
  assert.ok(toGig > toRamen + 0.2, `gig ${toGig.toFixed(3)}, ramen ${toRamen.toFixed(3)}`);
});

it("as the service's embedding model, a question reaches the turn that words it otherwise", async () => {
  const ranks: Record<string, number> = {};
  for (const [label, model] of [
    ["bm25", undefined],
    ["word vectors", createWordVectorEmbedder()],
  ] as const) {
    let now = new Date("2023-03-01T18:00:00Z");
    const service = createMemoryService({
      store: createSqliteStore({ path: ":memory:" }),
      now: () => now,
      ...(model ? { embeddingModel: model, vectorWeight: wordVectorWeight } : {}),
    });
    const say = async (speaker: string, text: string) => {
      now = new Date(now.getTime() + 60_000);
      await service.add("t", { userId: "talk", content: `${speaker}: ${text}`, metadata: { speaker } });
    };
    for (let index = 0; index < 12; index += 1) {
      await say("Jonas", `How was your week, Maya? Mine was mostly laundry (${index}).`);
      await say("Maya", `Busy, the cat next door kept me up (${index}).`);
    }
    await say("Jonas", "How is the new gig going?");
    for (let index = 0; index < 6; index += 1)
      await say("Jonas", `I had ramen with Lena yesterday (${index}).`);
    const found = await service.search("t", { userId: "talk", query: "Where does Maya work?", limit: 40 });
    ranks[label] = found.results.findIndex((hit) => hit.memory.content.includes("new gig"));
    await service.close();
  }
  assert.ok(
    ranks.bm25 === -1 || ranks.bm25! > 10,
    `no word of the question is in the gig turn: ${ranks.bm25}`,
  );
  assert.ok(ranks["word vectors"]! >= 0 && ranks["word vectors"]! < 5, JSON.stringify(ranks));
});
