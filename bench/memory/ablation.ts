/**
 * The retrieval ablation (ADR 0360): every retrieval feature of the service switched off in turn, on
 * every evaluation set, beside two plain search libraries, then one row per way turns reach the service.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/ablation.ts [--set=dialogues] [--paths=plain,events] [--base=neighbours] [--vector-weight=0.1] [--encoder-weight=0.2] [--embedders=word-vectors,sentence-encoder]
 * Two local embedders are measured as "with" rows, the service as configured plus the embedder: the
 * word-vector one (`@tackle/memory/word-vectors`) at `--vector-weight` (default `wordVectorWeight`,
 * 0.5), and the Universal Sentence Encoder lite (`./sentence-encoder.ts`, measured, not offered) at
 * `--encoder-weight` (default 0.2, chosen on the long dev set). `--embedders=` (empty) leaves both out.
 * A feature stays only if switching it off costs the held-out set at least 0.01 of recall@10 and it
 * costs at most 2 ms of p50. Latency is `searchRanked` alone (no trace write), SQLite in memory, in process;
 * the rule reads the CPU time of the search in this process (the machine is shared: its wall time
 * mostly measures the other processes), the wall time is printed beside it.
 */
import { createMemoryService, createSqliteStore, type MemoryService } from "@tackle/memory";
import { createWordVectorEmbedder, wordVectorWeight } from "@tackle/memory/word-vectors";
import type { MemoryEmbeddingModel } from "../../packages/memory/src/service/embedder.ts";
import {
  createSearchRanked,
  type RetrievalFeatures,
  shippedRetrievalFeatures,
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
import { createSentenceEncoderEmbedder } from "./sentence-encoder.ts";

const argument = (name: string) => process.argv.find((item) => item.startsWith(`--${name}=`))?.split("=")[1];
const sets = loadSets(argument("set"));
// `--paths=` (empty) runs no other path.
const paths =
  (argument("paths")
    ?.split(",")
    .filter((path) => path.length > 0) as IngestPath[] | undefined) ??
  ingestPaths.filter((path) => path !== "episode");
const unknownPath = paths.find((path) => !ingestPaths.includes(path));
if (unknownPath !== undefined)
  throw new Error(`--paths: no path "${unknownPath}" (${ingestPaths.join(", ")})`);
const featureNames = Object.keys(shippedRetrievalFeatures) as (keyof RetrievalFeatures)[];

interface Row {
  readonly label: string;
  /** Per set: one score per question. */
  readonly scores: Map<string, Score[]>;
  readonly milliseconds: number[];
  /** CPU time of this process per search: on a shared, loaded machine the wall time mostly measures the others. */
  readonly cpuMilliseconds: number[];
}
const cpuNow = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

const mean = (values: readonly number[]) =>
  values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((left, right) => left - right);
  return sorted.length === 0 ? 0 : sorted[Math.floor((sorted.length - 1) / 2)]!;
};
const recall = (row: Row, set: EvalSet, k: keyof Score) =>
  mean((row.scores.get(set.name) ?? []).map((item) => item[k]));

/** An embedder's row: the model and the weight its similarity gets. */
interface Vectors {
  readonly embeddingModel: MemoryEmbeddingModel;
  readonly vectorWeight?: number;
}

async function withService<T>(
  body: (
    service: MemoryService,
    context: ReturnType<typeof createServiceContext>,
    setClock: (at: Date) => void,
  ) => Promise<T>,
  vectors?: Vectors,
) {
  let now = new Date();
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now, ...vectors });
  const context = createServiceContext({ store, now: () => now, ...vectors });
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
  vectors?: Vectors,
) {
  const rows: Row[] = configurations.map(({ label }) => ({
    label,
    scores: new Map(),
    milliseconds: [],
    cpuMilliseconds: [],
  }));
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
            const cpuStarted = cpuNow();
            const ranked = await search(
              "eval",
              { userId: conversation.id },
              question.question,
              20,
              undefined,
            );
            rows[index]!.milliseconds.push(performance.now() - started);
            rows[index]!.cpuMilliseconds.push(cpuNow() - cpuStarted);
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
    }, vectors);
  }
  return { rows, ingestMs };
}

function runLibraries(): Row[] {
  return libraries.map((library) => {
    const row: Row = { label: library.label, scores: new Map(), milliseconds: [], cpuMilliseconds: [] };
    for (const set of sets) {
      const list: Score[] = [];
      for (const conversation of set.conversations) {
        const search = library.index(set, conversation);
        for (const question of conversation.questions) {
          const started = performance.now();
          const cpuStarted = cpuNow();
          const ranked = search(question.question, 20);
          row.milliseconds.push(performance.now() - started);
          row.cpuMilliseconds.push(cpuNow() - cpuStarted);
          list.push(score(ranked, question.evidence));
        }
      }
      row.scores.set(set.name, list);
    }
    return row;
  });
}

/** Whether a row is below a library at recall@5, @10 or @20 on some set (the floor the rule keeps). */
const belowALibrary = (row: Row, libraryRows: readonly Row[]) =>
  sets.some((set) =>
    (["recall5", "recall10", "recall20"] as const).some((k) =>
      libraryRows.some((library) => recall(row, set, k) < recall(library, set, k)),
    ),
  );

function printTable(title: string, rows: readonly Row[], reference?: Row, libraryRows: readonly Row[] = []) {
  const heldOut = sets.find((set) => set.heldOut);
  console.log(`### ${title}\n`);
  const header = sets.flatMap((set) => [`${set.name} r@5`, "r@10", "r@20"]);
  const extra =
    reference && heldOut
      ? ["held-out r@10 the feature lifts", "CPU p50 ms the feature costs", "verdict"]
      : [];
  console.log(`| row | ${[...header, "p50 ms", "CPU p50 ms", ...extra].join(" | ")} |`);
  console.log(`| --- | ${[...header, "p50", "cpu", ...extra].map(() => "---:").join(" | ")} |`);
  for (const row of rows) {
    const cells = sets.flatMap((set) =>
      (["recall5", "recall10", "recall20"] as const).map((k) => recall(row, set, k).toFixed(3)),
    );
    const after: string[] = [];
    const adds = row.label.startsWith("with ");
    if (reference && heldOut && row !== reference && (adds || row.label.startsWith("without "))) {
      // Lift and cost of the feature: switching it off (a "without" row) or on (a "with" row).
      const sign = adds ? -1 : 1;
      const lost = sign * (recall(reference, heldOut, "recall10") - recall(row, heldOut, "recall10"));
      const saved = sign * (median(reference.cpuMilliseconds) - median(row.cpuMilliseconds));
      const pays = lost >= 0.01 && saved <= 2;
      // Without it, retrieval would fall below a plain library on some set: kept for that floor.
      const floor = !adds && belowALibrary(row, libraryRows) && !belowALibrary(reference, libraryRows);
      after.push(
        lost.toFixed(3),
        saved.toFixed(2),
        adds ? (pays ? "add" : "leave out") : pays ? "keep" : floor ? "keep (library floor)" : "remove",
      );
    } else if (reference && heldOut) after.push("", "", "");
    console.log(
      `| ${row.label} | ${[...cells, median(row.milliseconds).toFixed(2), median(row.cpuMilliseconds).toFixed(2), ...after].join(" | ")} |`,
    );
  }
  console.log("");
}

console.log(
  `Node ${process.versions.node}; sets: ${sets.map((set) => `${set.name}: ${set.conversations.length} conversations, ${turnCount(set)} turns, ${set.conversations.reduce((sum, item) => sum + item.questions.length, 0)} questions`).join("; ")}\n`,
);
/**
 * `--base=a,b`: a set of features, each other one switched on beside it ("with") and each of its own
 * switched off ("without"); a set where every "without" says keep and every "with" says leave out is
 * one the rule holds for. Without it the base is the service as shipped (`shippedRetrievalFeatures`).
 */
const baseArgument = argument("base")?.split(",") as (keyof RetrievalFeatures)[] | undefined;
const base = baseArgument ?? featureNames.filter((name) => shippedRetrievalFeatures[name]);
const baseSwitches = Object.fromEntries(featureNames.map((name) => [name, base.includes(name)]));
const configurations = [
  {
    label: baseArgument ? `base: ${base.join(", ")}` : "the service as shipped",
    switches: baseSwitches,
  },
  ...featureNames
    .filter((name) => !base.includes(name))
    .map((name) => ({ label: `with ${name}`, switches: { ...baseSwitches, [name]: true } })),
  ...featureNames
    .filter((name) => base.includes(name))
    .map((name) => ({ label: `without ${name}`, switches: { ...baseSwitches, [name]: false } })),
  {
    label: "no feature: the store's scoped BM25 alone",
    switches: Object.fromEntries(featureNames.map((name) => [name, false])),
  },
];
const features = await runPath("episode", configurations);
const embedders = (argument("embedders") ?? "word-vectors,sentence-encoder").split(",");
const vectorWeight = Number(argument("vector-weight") ?? wordVectorWeight);
const encoderWeight = Number(argument("encoder-weight") ?? 0.2);
/** The local embedders measured as "with" rows, by their `--embedders` name. */
const embedderChoices = [
  {
    name: "word-vectors",
    label: `with word vectors (\`@tackle/memory/word-vectors\`, vectorWeight ${vectorWeight})`,
    model: createWordVectorEmbedder,
    weight: vectorWeight,
  },
  {
    name: "sentence-encoder",
    label: `with the Universal Sentence Encoder lite (\`@energetic-ai\`, vectorWeight ${encoderWeight})`,
    model: createSentenceEncoderEmbedder,
    weight: encoderWeight,
  },
];
const embedderRows: Row[] = [];
for (const choice of embedderChoices.filter(({ name }) => embedders.includes(name))) {
  const { rows } = await runPath("episode", [{ label: choice.label, switches: baseSwitches }], {
    embeddingModel: choice.model(),
    vectorWeight: choice.weight,
  });
  embedderRows.push(...rows);
}
const baselines = runLibraries();
printTable(
  `Features (turns added as episodes: ${pathLabels.episode})`,
  [features.rows[0]!, ...embedderRows, ...features.rows.slice(1), ...baselines],
  features.rows[0],
  baselines,
);

const pathRows: Row[] = [{ ...features.rows[0]!, label: `${pathLabels.episode}` }];
const ingestion: string[] = [`episode: ${median(features.ingestMs).toFixed(0)} ms a conversation (median)`];
for (const path of paths) {
  const { rows, ingestMs } = await runPath(path, [configurations[0]!]);
  pathRows.push({ ...rows[0]!, label: pathLabels[path] });
  ingestion.push(`${path}: ${median(ingestMs).toFixed(0)} ms a conversation (median)`);
}
printTable(`Ways turns arrive (${configurations[0]!.label})`, pathRows);
console.log(`Storing one conversation, SQLite in memory: ${ingestion.join("; ")}\n`);
