/**
 * Retrieval quality on the two shipped sets: eval/conversations.json (LongMemEval-shaped: a user and
 * an assistant) and eval/dialogues.json (LoCoMo-shaped: long dated conversations between two named
 * speakers, with temporal and multi-hop questions). Every turn is stored as a memory of its
 * conversation (clock set to the session's date; a two-speaker turn as "Speaker: text"), then each
 * question searches that conversation's memories. Reports recall@5, @10, @20 and MRR for:
 *   - the service's default BM25 ranking (no network, no model), on SQLite and on PostgreSQL,
 *   - the service's fused ranking with the DETERMINISTIC HASHING TEST EMBEDDER (not a real model),
 *   - a raw baseline: cosine over the same test embedder alone (no BM25, no service).
 * Every figure is printed twice: on the "dev" users (ranking choices were tuned on them) and on the
 * "held-out" users (never looked at while tuning) — the held-out column is the one to quote.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/retrieval-quality.ts
 * Flags: --set=dialogues (one set), --quick (the SQLite BM25 row only), --fused (the fused row only),
 * --vector-weight=0.3 (the fused rows' weight; swap createHashingTestEmbedder for a real model to
 * measure one).
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
    speakers?: string[];
    sessions: { id: number; date: string; turns: Turn[] }[];
    questions: { question: string; category: string; evidence: string[] }[];
  }[];
}

const argument = (name: string) => process.argv.find((item) => item.startsWith(`--${name}=`))?.split("=")[1];
/** `--set=dialogues` runs one set; `--quick` only the SQLite BM25 row (for trying a ranking change). */
const onlySet = argument("set");
const quick = process.argv.includes("--quick");
/** `--fused`: only the fused row (for trying a fusion change). */
const fusedOnly = process.argv.includes("--fused");
/** `--vector-weight=0.3`: the fused rows' `vectorWeight` (the service's default otherwise). */
const vectorWeight = argument("vector-weight") === undefined ? undefined : Number(argument("vector-weight"));

const sets = [
  { name: "conversations.json (user and assistant)", file: "./eval/conversations.json", speakers: false },
  {
    name: "dialogues.json (two named speakers, dated sessions)",
    file: "./eval/dialogues.json",
    speakers: true,
  },
]
  .filter((item) => onlySet === undefined || item.file.includes(onlySet))
  .map((item) => ({
    ...item,
    data: JSON.parse(readFileSync(new URL(item.file, import.meta.url), "utf8")) as EvalSet,
  }));

interface Score {
  recall5: number;
  recall10: number;
  recall20: number;
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
    recall20: recallAt(20),
    reciprocalRank: first === -1 ? 0 : 1 / (first + 1),
    category,
    split,
  };
}

type EvalSetEntry = (typeof sets)[number];
const turnText = (set: EvalSetEntry, turn: Turn) =>
  set.speakers ? `${turn.speaker}: ${turn.text}` : turn.text;

async function evaluateService(
  set: EvalSetEntry,
  label: string,
  fused: boolean,
  store: MemoryStore,
): Promise<{ label: string; scores: Score[]; ms: number; stored: number }> {
  let now = new Date();
  let stored = 0;
  const service: MemoryService = createMemoryService({
    store,
    now: () => now,
    ...(fused ? { embeddingModel: createHashingTestEmbedder() } : {}),
    ...(fused && vectorWeight !== undefined ? { vectorWeight } : {}),
  });
  const started = performance.now();
  const scores: Score[] = [];
  for (const conversation of set.data.conversations) {
    for (const session of conversation.sessions) {
      for (const [index, turn] of session.turns.entries()) {
        now = new Date(Date.parse(session.date) + index * 60_000);
        // A turn is an episode: stored even when its words repeat an earlier turn (ADR 0355).
        const added = await service.add("eval", {
          userId: conversation.id,
          kind: "episode",
          content: turnText(set, turn),
          metadata: { turnId: turn.id, speaker: turn.speaker },
        });
        if (added.created) stored += 1;
      }
    }
    now = new Date(Date.parse(conversation.sessions.at(-1)!.date) + 86_400_000);
    for (const question of conversation.questions) {
      const found = await service.search("eval", {
        userId: conversation.id,
        query: question.question,
        limit: 20,
      });
      const ranked = found.results.map((result) => String(result.memory.metadata.turnId));
      scores.push(score(ranked, question.evidence, question.category, conversation.split));
    }
  }
  await service.close();
  return { label, scores, ms: performance.now() - started, stored };
}

function evaluateVectorOnly(set: EvalSetEntry): {
  label: string;
  scores: Score[];
  ms: number;
  stored: number;
} {
  const started = performance.now();
  const scores: Score[] = [];
  const unit = (vector: number[]) => {
    const norm = Math.hypot(...vector) || 1;
    return vector.map((value) => value / norm);
  };
  for (const conversation of set.data.conversations) {
    const turns = conversation.sessions.flatMap((session) => session.turns);
    const vectors = turns.map((turn) => unit(embedTextForTest(turnText(set, turn))));
    for (const question of conversation.questions) {
      const query = unit(embedTextForTest(question.question));
      const ranked = turns
        .map((turn, index) => ({
          id: turn.id,
          similarity: vectors[index]!.reduce((sum, value, at) => sum + value * query[at]!, 0),
        }))
        .sort((left, right) => right.similarity - left.similarity)
        .slice(0, 20)
        .map((entry) => entry.id);
      scores.push(score(ranked, question.evidence, question.category, conversation.split));
    }
  }
  return {
    label: "raw baseline: cosine over the test embedder alone",
    scores,
    ms: performance.now() - started,
    stored: set.data.conversations.reduce(
      (sum, conversation) =>
        sum + conversation.sessions.reduce((inner, session) => inner + session.turns.length, 0),
      0,
    ),
  };
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
const format = (value: number) => value.toFixed(3);
const splits = ["dev", "held-out"] as const;
const inSplit = (scores: Score[], split: string) => scores.filter((item) => item.split === split);

console.log(
  `Node ${process.versions.node}; search limit 20; recall@k = share of a question's evidence turns in the top k\n`,
);
for (const set of sets) {
  const postgres = await createTestDatabase("tackle_memory_quality");
  const rows = [
    await evaluateService(
      set,
      fusedOnly
        ? "Tackle service, fused BM25 + vectors on SQLite (deterministic hashing TEST embedder)"
        : "Tackle service, BM25 on SQLite (default: no network, no model)",
      fusedOnly,
      createSqliteStore({ path: ":memory:" }),
    ),
  ];
  if (!quick && !fusedOnly) {
    rows.push(
      await evaluateService(
        set,
        "Tackle service, BM25 on PostgreSQL (no network, no model)",
        false,
        await createPostgresStore({ connectionString: postgres.url }),
      ),
      await evaluateService(
        set,
        "Tackle service, fused BM25 + vectors on SQLite (deterministic hashing TEST embedder)",
        true,
        createSqliteStore({ path: ":memory:" }),
      ),
      evaluateVectorOnly(set),
    );
  }
  await postgres.drop();
  const conversations = set.data.conversations;
  const turns = conversations.reduce(
    (sum, conversation) =>
      sum + conversation.sessions.reduce((inner, session) => inner + session.turns.length, 0),
    0,
  );
  console.log(
    `### ${set.name}: ${conversations.length} conversations (${splits.map((split) => `${conversations.filter((item) => item.split === split).length} ${split}`).join(", ")}), ${turns} turns offered as memories (${rows[0]!.stored} stored), ${rows[0]!.scores.length} questions\n`,
  );
  console.log(
    "| ranking | dev r@5 | dev r@10 | dev r@20 | dev MRR | held-out r@5 | held-out r@10 | held-out r@20 | held-out MRR | wall s |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) {
    const cells = splits.flatMap((split) => {
      const scores = inSplit(row.scores, split);
      return [
        format(mean(scores.map((item) => item.recall5))),
        format(mean(scores.map((item) => item.recall10))),
        format(mean(scores.map((item) => item.recall20))),
        format(mean(scores.map((item) => item.reciprocalRank))),
      ];
    });
    console.log(`| ${row.label} | ${cells.join(" | ")} | ${(row.ms / 1000).toFixed(1)} |`);
  }
  const categories = [...new Set(rows[0]!.scores.map((item) => item.category))];
  for (const split of splits) {
    console.log(`\nrecall@5 / @10 / @20 by question category, ${split}:\n`);
    console.log(
      `| ranking | ${categories.map((category) => `${category} (n=${inSplit(rows[0]!.scores, split).filter((item) => item.category === category).length})`).join(" | ")} |`,
    );
    console.log(`| --- | ${categories.map(() => "---:").join(" | ")} |`);
    for (const row of rows) {
      const cells = categories.map((category) => {
        const scores = inSplit(row.scores, split).filter((item) => item.category === category);
        return [
          scores.map((item) => item.recall5),
          scores.map((item) => item.recall10),
          scores.map((item) => item.recall20),
        ]
          .map((values) => format(mean(values)))
          .join(" / ");
      });
      console.log(`| ${row.label} | ${cells.join(" | ")} |`);
    }
  }
  console.log("");
}
