/**
 * Retrieval quality on the shipped LoCoMo/LongMemEval-shaped set (eval/conversations.json):
 * every dialogue turn is stored as a memory of its user (clock set to the session's date), then
 * each question searches that user's memories. Reports recall@5, recall@10 and MRR for:
 *   - the service's default BM25 ranking (no network, no model),
 *   - the service's fused ranking with the DETERMINISTIC HASHING TEST EMBEDDER (not a real model),
 *   - a raw baseline: cosine over the same test embedder alone (no BM25, no service).
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/retrieval-quality.ts
 */
import { readFileSync } from "node:fs";
import { createMemoryService, createSqliteStore, type MemoryService } from "@tackle/memory";
import { createHashingTestEmbedder, embedTextForTest } from "@tackle/memory/test";

interface Turn {
  id: string;
  speaker: string;
  text: string;
}
interface EvalSet {
  conversations: {
    id: string;
    sessions: { id: number; date: string; turns: Turn[] }[];
    questions: { question: string; category: string; evidence: string[] }[];
  }[];
}

const evalSet = JSON.parse(
  readFileSync(new URL("./eval/conversations.json", import.meta.url), "utf8"),
) as EvalSet;

interface Score {
  recall5: number;
  recall10: number;
  reciprocalRank: number;
  category: string;
}

function score(ranked: readonly string[], evidence: readonly string[], category: string): Score {
  const recallAt = (k: number) =>
    evidence.filter((id) => ranked.slice(0, k).includes(id)).length / evidence.length;
  const first = ranked.findIndex((id) => evidence.includes(id));
  return {
    recall5: recallAt(5),
    recall10: recallAt(10),
    reciprocalRank: first === -1 ? 0 : 1 / (first + 1),
    category,
  };
}

async function evaluateService(
  label: string,
  fused: boolean,
): Promise<{ label: string; scores: Score[]; ms: number }> {
  let now = new Date();
  const service: MemoryService = createMemoryService({
    store: createSqliteStore({ path: ":memory:" }),
    now: () => now,
    ...(fused ? { embeddingModel: createHashingTestEmbedder() } : {}),
  });
  const started = performance.now();
  const scores: Score[] = [];
  for (const conversation of evalSet.conversations) {
    for (const session of conversation.sessions) {
      for (const [index, turn] of session.turns.entries()) {
        now = new Date(Date.parse(session.date) + index * 60_000);
        await service.add("eval", {
          userId: conversation.id,
          content: turn.text,
          metadata: { turnId: turn.id, speaker: turn.speaker },
        });
      }
    }
    now = new Date(Date.parse(conversation.sessions.at(-1)!.date) + 86_400_000);
    for (const question of conversation.questions) {
      const found = await service.search("eval", {
        userId: conversation.id,
        query: question.question,
        limit: 10,
      });
      const ranked = found.results.map((result) => String(result.memory.metadata.turnId));
      scores.push(score(ranked, question.evidence, question.category));
    }
  }
  await service.close();
  return { label, scores, ms: performance.now() - started };
}

function evaluateVectorOnly(): { label: string; scores: Score[]; ms: number } {
  const started = performance.now();
  const scores: Score[] = [];
  const unit = (vector: number[]) => {
    const norm = Math.hypot(...vector) || 1;
    return vector.map((value) => value / norm);
  };
  for (const conversation of evalSet.conversations) {
    const turns = conversation.sessions.flatMap((session) => session.turns);
    const vectors = turns.map((turn) => unit(embedTextForTest(turn.text)));
    for (const question of conversation.questions) {
      const query = unit(embedTextForTest(question.question));
      const ranked = turns
        .map((turn, index) => ({
          id: turn.id,
          similarity: vectors[index]!.reduce((sum, value, at) => sum + value * query[at]!, 0),
        }))
        .sort((left, right) => right.similarity - left.similarity)
        .slice(0, 10)
        .map((entry) => entry.id);
      scores.push(score(ranked, question.evidence, question.category));
    }
  }
  return {
    label: "raw baseline: cosine over the test embedder alone",
    scores,
    ms: performance.now() - started,
  };
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
const format = (value: number) => value.toFixed(3);

const rows = [
  await evaluateService("Tackle service, BM25 (default: no network, no model)", false),
  await evaluateService("Tackle service, fused BM25 + vectors (deterministic hashing TEST embedder)", true),
  evaluateVectorOnly(),
];
const questions = rows[0]!.scores.length;
const turns = evalSet.conversations.reduce(
  (sum, conversation) =>
    sum + conversation.sessions.reduce((inner, session) => inner + session.turns.length, 0),
  0,
);
console.log(
  `eval set: ${evalSet.conversations.length} users, ${turns} turns offered as memories (the default novelty check folds repeats), ${questions} questions; Node ${process.versions.node}\n`,
);
console.log("| ranking | recall@5 | recall@10 | MRR | vs BM25 MRR | wall time s |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
const baseMrr = mean(rows[0]!.scores.map((item) => item.reciprocalRank));
for (const row of rows) {
  const mrr = mean(row.scores.map((item) => item.reciprocalRank));
  console.log(
    `| ${row.label} | ${format(mean(row.scores.map((item) => item.recall5)))} | ${format(mean(row.scores.map((item) => item.recall10)))} | ${format(mrr)} | ${(mrr / baseMrr).toFixed(2)}× | ${(row.ms / 1000).toFixed(1)} |`,
  );
}
const categories = [...new Set(rows[0]!.scores.map((item) => item.category))];
console.log(`\nrecall@5 by question category:\n`);
console.log(
  `| ranking | ${categories.map((category) => `${category} (n=${rows[0]!.scores.filter((item) => item.category === category).length})`).join(" | ")} |`,
);
console.log(`| --- | ${categories.map(() => "---:").join(" | ")} |`);
for (const row of rows) {
  const cells = categories.map((category) =>
    format(mean(row.scores.filter((item) => item.category === category).map((item) => item.recall5))),
  );
  console.log(`| ${row.label} | ${cells.join(" | ")} |`);
}
