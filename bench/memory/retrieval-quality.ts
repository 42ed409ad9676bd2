/**
 * Retrieval quality on the shipped LoCoMo/LongMemEval-shaped set (eval/conversations.json):
 * every dialogue turn is stored as a memory of its user (clock set to the session's date), then
 * each question searches that user's memories. Reports recall@5, recall@10 and MRR for:
 *   - the service's default BM25 ranking (no network, no model), on SQLite and on PostgreSQL,
 *   - the service's fused ranking with the DETERMINISTIC HASHING TEST EMBEDDER (not a real model),
 *   - a raw baseline: cosine over the same test embedder alone (no BM25, no service).
 * Every figure is printed twice: on the "dev" users (ranking choices were tuned on them) and on the
 * "held-out" users (never looked at while tuning) — the held-out column is the one to quote.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/retrieval-quality.ts
 */
import { readFileSync } from "node:fs";
import { createMemoryService, createSqliteStore, type MemoryService, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createHashingTestEmbedder, embedTextForTest } from "@tackle/memory/test";
import { createTestDatabase } from "@tackle/test-support";

interface Turn {
  id: string;
  speaker: string;
  text: string;
}
interface EvalSet {
  conversations: {
    id: string;
    split: "dev" | "held-out";
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
  split: string;
}

function score(
  ranked: readonly string[],
  evidence: readonly string[],
  category: string,
  split: string,
): Score {
  const recallAt = (k: number) =>
    evidence.filter((id) => ranked.slice(0, k).includes(id)).length / evidence.length;
  const first = ranked.findIndex((id) => evidence.includes(id));
  return {
    recall5: recallAt(5),
    recall10: recallAt(10),
    reciprocalRank: first === -1 ? 0 : 1 / (first + 1),
    category,
    split,
  };
}

async function evaluateService(
  label: string,
  fused: boolean,
  store: MemoryStore,
): Promise<{ label: string; scores: Score[]; ms: number }> {
  let now = new Date();
  const service: MemoryService = createMemoryService({
    store,
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
      scores.push(score(ranked, question.evidence, question.category, conversation.split));
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
      scores.push(score(ranked, question.evidence, question.category, conversation.split));
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

const postgres = await createTestDatabase("tackle_memory_quality");
const rows = [
  await evaluateService(
    "Tackle service, BM25 on SQLite (default: no network, no model)",
    false,
    createSqliteStore({ path: ":memory:" }),
  ),
  await evaluateService(
    "Tackle service, BM25 on PostgreSQL (no network, no model)",
    false,
    await createPostgresStore({ connectionString: postgres.url }),
  ),
  await evaluateService(
    "Tackle service, fused BM25 + vectors on SQLite (deterministic hashing TEST embedder)",
    true,
    createSqliteStore({ path: ":memory:" }),
  ),
  evaluateVectorOnly(),
];
await postgres.drop();
const splits = ["dev", "held-out"] as const;
const questions = rows[0]!.scores.length;
const turns = evalSet.conversations.reduce(
  (sum, conversation) =>
    sum + conversation.sessions.reduce((inner, session) => inner + session.turns.length, 0),
  0,
);
const inSplit = (scores: Score[], split: string) => scores.filter((item) => item.split === split);
console.log(
  `eval set: ${evalSet.conversations.length} users (${splits.map((split) => `${evalSet.conversations.filter((item) => item.split === split).length} ${split}`).join(", ")}), ${turns} turns offered as memories (the default novelty check folds repeats), ${questions} questions; Node ${process.versions.node}\n`,
);
console.log(
  "| ranking | dev recall@5 | dev recall@10 | dev MRR | held-out recall@5 | held-out recall@10 | held-out MRR | wall time s |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  const cells = splits.flatMap((split) => {
    const scores = inSplit(row.scores, split);
    return [
      format(mean(scores.map((item) => item.recall5))),
      format(mean(scores.map((item) => item.recall10))),
      format(mean(scores.map((item) => item.reciprocalRank))),
    ];
  });
  console.log(`| ${row.label} | ${cells.join(" | ")} | ${(row.ms / 1000).toFixed(1)} |`);
}
const categories = [...new Set(rows[0]!.scores.map((item) => item.category))];
for (const split of splits) {
  console.log(`\nrecall@5 by question category, ${split} users:\n`);
  console.log(
    `| ranking | ${categories.map((category) => `${category} (n=${inSplit(rows[0]!.scores, split).filter((item) => item.category === category).length})`).join(" | ")} |`,
  );
  console.log(`| --- | ${categories.map(() => "---:").join(" | ")} |`);
  for (const row of rows) {
    const cells = categories.map((category) =>
      format(
        mean(
          inSplit(row.scores, split)
            .filter((item) => item.category === category)
            .map((item) => item.recall5),
        ),
      ),
    );
    console.log(`| ${row.label} | ${cells.join(" | ")} |`);
  }
}
