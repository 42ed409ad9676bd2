/**
 * Two plain search libraries on the same turns, each with its README's settings: wink-bm25-text-search
 * (BM25 with wink-nlp-utils' lowercase, tokenize, stop words, stem pipeline) and MiniSearch (its
 * default tokenizer, OR of the terms). One index per conversation, as the service scopes one.
 */
import MiniSearch from "minisearch";
import bm25 from "wink-bm25-text-search";
import nlp from "wink-nlp-utils";
import type { Conversation, EvalSet } from "./eval-sets.ts";
import { turnText } from "./eval-sets.ts";

export interface Library {
  readonly label: string;
  /** Builds the conversation's index and answers a search: turn ids, best first. */
  index(set: EvalSet, conversation: Conversation): (query: string, limit: number) => string[];
}

const winkPipe = [
  nlp.string.lowerCase,
  nlp.string.tokenize0,
  nlp.tokens.removeWords,
  nlp.tokens.stem,
  nlp.tokens.propagateNegations,
];

export const libraries: readonly Library[] = [
  {
    label: "wink-bm25-text-search (README settings)",
    index(set, conversation) {
      const engine = bm25();
      engine.defineConfig({ fldWeights: { body: 1 } });
      engine.definePrepTasks(winkPipe);
      for (const session of conversation.sessions) {
        for (const turn of session.turns) engine.addDoc({ body: turnText(set, turn) }, turn.id);
      }
      engine.consolidate();
      return (query, limit) => engine.search(query, limit).map(([id]) => String(id));
    },
  },
  {
    label: "MiniSearch (README settings)",
    index(set, conversation) {
      const search = new MiniSearch<{ id: string; body: string }>({ fields: ["body"] });
      search.addAll(
        conversation.sessions.flatMap((session) =>
          session.turns.map((turn) => ({ id: turn.id, body: turnText(set, turn) })),
        ),
      );
      return (query, limit) =>
        search
          .search(query)
          .slice(0, limit)
          .map((result) => String(result.id));
    },
  },
];
