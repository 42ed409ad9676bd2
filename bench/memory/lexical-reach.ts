/**
 * How far words can reach: each evidence turn of each set sorted by what it shares with its
 * question, and recall@10 of the service and of wink-bm25-text-search within each class. A turn that
 * shares no word with its question, not even through the two turns each side, can only be found by
 * something that reads meaning; this prints how many such turns each set holds.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/lexical-reach.ts [--set=long-dev]
 * Words are the service's query terms (`queryTerms`: lowercase, stop words out) stemmed as the store
 * stems them (Porter's English stemmer, as wink-nlp-utils gives it), so "hired" and "hiring" count as shared.
 */
import { createMemoryService, createSqliteStore } from "@tackle/memory";
import nlp from "wink-nlp-utils";
import { createSearchRanked } from "../../packages/memory/src/service/search-ranked.ts";
import { createServiceContext } from "../../packages/memory/src/service/service-context.ts";
import { queryTerms } from "../../packages/memory/src/service/text.ts";
import { type Conversation, type EvalSet, ingest, loadSets, turnFinder } from "./eval-sets.ts";
import { libraries } from "./library-baselines.ts";

const only = process.argv.find((item) => item.startsWith("--set="))?.split("=")[1];
const classes = ["its own words", "a neighbour's words only", "no word within two turns"] as const;
type Reach = (typeof classes)[number];
/** Turns each side whose words count as a neighbour's (the service's neighbouring turns, ADR 0367). */
const window = 2;

const stems = (text: string) => new Set(queryTerms(text).map((word) => nlp.string.stem(word)));

/** Each evidence turn's class: what it, or a turn of its session within `window`, shares with the question. */
function reachOf(conversation: Conversation, question: string, evidence: string): Reach {
  const asked = stems(question);
  const shares = (text: string) => [...stems(text)].some((word) => asked.has(word));
  const session = conversation.sessions.find((item) => item.turns.some((turn) => turn.id === evidence))!;
  const at = session.turns.findIndex((turn) => turn.id === evidence);
  if (shares(session.turns[at]!.text)) return classes[0];
  const near = session.turns.slice(Math.max(0, at - window), at + window + 1);
  return near.some((turn, index) => index !== Math.min(at, window) && shares(turn.text))
    ? classes[1]
    : classes[2];
}

interface Tally {
  turns: number;
  service: number;
  wink: number;
}

async function tallySet(set: EvalSet): Promise<Map<Reach, Tally>> {
  const tally = new Map(classes.map((reach) => [reach, { turns: 0, service: 0, wink: 0 }]));
  let now = new Date();
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now });
  const search = createSearchRanked(createServiceContext({ store, now: () => now }));
  try {
    for (const conversation of set.conversations) {
      await ingest(service, set, conversation, "episode", (at) => {
        now = at;
      });
    }
    for (const conversation of set.conversations) {
      const find = turnFinder(set, conversation);
      const wink = libraries[0]!.index(set, conversation);
      now = new Date(Date.parse(conversation.sessions.at(-1)!.date) + 86_400_000);
      for (const { question, evidence } of conversation.questions) {
        const ranked = await search("eval", { userId: conversation.id }, question, 20, undefined);
        const found = [...new Set(ranked.map((hit) => find(hit.memory.content)))].slice(0, 10);
        const winkFound = wink(question, 10);
        for (const id of evidence) {
          const entry = tally.get(reachOf(conversation, question, id))!;
          entry.turns += 1;
          if (found.includes(id)) entry.service += 1;
          if (winkFound.includes(id)) entry.wink += 1;
        }
      }
    }
  } finally {
    await service.close();
  }
  return tally;
}

console.log("| set | evidence turns | sharing … | share of turns | service recall@10 | wink recall@10 |");
console.log("| --- | ---: | --- | ---: | ---: | ---: |");
for (const set of loadSets(only)) {
  const tally = await tallySet(set);
  const total = [...tally.values()].reduce((sum, entry) => sum + entry.turns, 0);
  for (const [reach, entry] of tally) {
    const share = (count: number) => (entry.turns === 0 ? "–" : (count / entry.turns).toFixed(3));
    console.log(
      `| ${set.name} | ${total} | ${reach} | ${(entry.turns / total).toFixed(3)} | ${share(entry.service)} | ${share(entry.wink)} |`,
    );
  }
}
