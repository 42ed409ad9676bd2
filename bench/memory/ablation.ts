/**
 * The retrieval ablation (ADR 0360): every retrieval feature of the service switched off in turn, on
 * every evaluation set, beside two plain search libraries, then one row per way turns reach the service.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/ablation.ts [--set=dialogues] [--paths=plain,events]
 * A feature stays only if switching it off costs the held-out set at least 0.01 of recall@10 and it
 * costs at most 2 ms of p50. Latency is `searchRanked` alone (no trace write), SQLite in memory, in process.
 */
import { createMemoryService, createSqliteStore, type MemoryService } from "@tackle/memory";
import {
  allRetrievalFeatures,
  createSearchRanked,
  type RetrievalFeatures,
} from "../../packages/memory/src/service/search-ranked.ts";
import { createServiceContext } from "../../packages/memory/src/service/service-context.ts";
import {
  type EvalSet,
  type IngestPath,
  ingest,
  ingestPaths,
  loadSets,
  pathLabels,
  type Score,
  score,
  turnCount,
  turnFinder,
} from "./eval-sets.ts";
import { libraries } from "./library-baselines.ts";

const argument = (name: string) => process.argv.find((item) => item.startsWith(`--${name}=`))?.split("=")[1];
const sets = loadSets(argument("set"));
const paths =
  (argument("paths")?.split(",") as IngestPath[] | undefined) ??
  ingestPaths.filter((path) => path !== "episode");
const featureNames = Object.keys(allRetrievalFeatures) as (keyof RetrievalFeatures)[];

interface Row {
  readonly label: string;
  /** Per set: one score per question. */
  readonly scores: Map<string, Score[]>;
  readonly milliseconds: number[];
}

const mean = (values: readonly number[]) =>
  values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((left, right) => left - right);
  return sorted.length === 0 ? 0 : sorted[Math.floor((sorted.length - 1) / 2)]!;
};
const recall = (row: Row, set: EvalSet, k: keyof Score) =>
  mean((row.scores.get(set.name) ?? []).map((item) => item[k]));

async function withService<T>(
  body: (
    service: MemoryService,
    context: ReturnType<typeof createServiceContext>,
    setClock: (at: Date) => void,
  ) => Promise<T>,
) {
  let now = new Date();
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now });
  const context = createServiceContext({ store, now: () => now });
  try {
    return await body(service, context, (at) => {
      now = at;
    });
  } finally {
    await service.close();
  }
}

/** Stores every set through `path`, then runs each configuration's questions on it. */
async function runPath(
  path: IngestPath,
  configurations: readonly { label: string; switches: Partial<RetrievalFeatures> }[],
) {
  const rows: Row[] = configurations.map(({ label }) => ({ label, scores: new Map(), milliseconds: [] }));
  const ingestMs: number[] = [];
  for (const set of sets) {
    await withService(async (service, context, setClock) => {
      for (const conversation of set.conversations) {
        const started = performance.now();
        await ingest(service, set, conversation, path, setClock);
        ingestMs.push(performance.now() - started);
      }
      const searches = configurations.map(({ switches }) => createSearchRanked(context, switches));
      for (const conversation of set.conversations) {
        const find = turnFinder(set, conversation);
        setClock(new Date(Date.parse(conversation.sessions.at(-1)!.date) + 86_400_000));
        for (const question of conversation.questions) {
          for (const [index, search] of searches.entries()) {
            const started = performance.now();
            const ranked = await search(
              "eval",
              { userId: conversation.id },
              question.question,
              20,
              undefined,
            );
            rows[index]!.milliseconds.push(performance.now() - started);
            const list = rows[index]!.scores.get(set.name) ?? [];
            list.push(
              score(
                ranked.map((item) => find(item.memory.content)),
                question.evidence,
              ),
            );
            rows[index]!.scores.set(set.name, list);
          }
        }
      }
    });
  }
  return { rows, ingestMs };
}

function runLibraries(): Row[] {
  return libraries.map((library) => {
    const row: Row = { label: library.label, scores: new Map(), milliseconds: [] };
    for (const set of sets) {
      const list: Score[] = [];
      for (const conversation of set.conversations) {
        const search = library.index(set, conversation);
        for (const question of conversation.questions) {
          const started = performance.now();
          const ranked = search(question.question, 20);
          row.milliseconds.push(performance.now() - started);
          list.push(score(ranked, question.evidence));
        }
      }
      row.scores.set(set.name, list);
    }
    return row;
  });
}

function printTable(title: string, rows: readonly Row[], reference?: Row) {
  const heldOut = sets.find((set) => set.heldOut);
  console.log(`### ${title}\n`);
  const header = sets.flatMap((set) => [`${set.name} r@5`, "r@10", "r@20"]);
  const extra =
    reference && heldOut ? ["held-out r@10 lost without it", "p50 ms saved without it", "verdict"] : [];
  console.log(`| row | ${[...header, "p50 ms", ...extra].join(" | ")} |`);
  console.log(`| --- | ${[...header, "p50", ...extra].map(() => "---:").join(" | ")} |`);
  for (const row of rows) {
    const cells = sets.flatMap((set) =>
      (["recall5", "recall10", "recall20"] as const).map((k) => recall(row, set, k).toFixed(3)),
    );
    const after: string[] = [];
    if (reference && heldOut && row !== reference && row.label.startsWith("without ")) {
      const lost = recall(reference, heldOut, "recall10") - recall(row, heldOut, "recall10");
      const saved = median(reference.milliseconds) - median(row.milliseconds);
      after.push(lost.toFixed(3), saved.toFixed(2), lost >= 0.01 && saved <= 2 ? "keep" : "remove");
    } else if (reference && heldOut) after.push("", "", "");
    console.log(
      `| ${row.label} | ${[...cells, median(row.milliseconds).toFixed(2), ...after].join(" | ")} |`,
    );
  }
  console.log("");
}

console.log(
  `Node ${process.versions.node}; sets: ${sets.map((set) => `${set.name}: ${set.conversations.length} conversations, ${turnCount(set)} turns, ${set.conversations.reduce((sum, item) => sum + item.questions.length, 0)} questions`).join("; ")}\n`,
);
const configurations = [
  { label: "all features (the service as shipped)", switches: {} },
  ...featureNames.map((name) => ({ label: `without ${name}`, switches: { [name]: false } })),
  {
    label: "no feature: the store's scoped BM25 alone",
    switches: Object.fromEntries(featureNames.map((name) => [name, false])),
  },
];
const features = await runPath("episode", configurations);
const baselines = runLibraries();
printTable(
  `Features (turns added as episodes: ${pathLabels.episode})`,
  [...features.rows, ...baselines],
  features.rows[0],
);

const pathRows: Row[] = [{ ...features.rows[0]!, label: `${pathLabels.episode}` }];
const ingestion: string[] = [`episode: ${median(features.ingestMs).toFixed(0)} ms a conversation (median)`];
for (const path of paths) {
  const { rows, ingestMs } = await runPath(path, [configurations[0]!]);
  pathRows.push({ ...rows[0]!, label: pathLabels[path] });
  ingestion.push(`${path}: ${median(ingestMs).toFixed(0)} ms a conversation (median)`);
}
printTable("Ways turns arrive (all features)", pathRows);
console.log(`Storing one conversation, SQLite in memory: ${ingestion.join("; ")}\n`);
