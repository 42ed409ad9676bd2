/**
 * What the retrieval features' tests share: one conversation stored as episodes a minute apart, and
 * the first memory the ranked search answers for a question with some features switched.
 */

import { createMemoryService } from "../../src/service/create-memory-service.ts";
import { createSearchRanked, type RetrievalFeatures } from "../../src/service/search-ranked.ts";
import { createServiceContext } from "../../src/service/service-context.ts";
import { createSqliteStore } from "../../src/store/sqlite/create-sqlite-store.ts";

/** Stores `turns` for user `talk` of tenant `t`, from `start` on, one a minute. */
export async function rankedConversation(turns: readonly string[], start: string) {
  let now = new Date(start);
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now });
  for (const [index, content] of turns.entries()) {
    now = new Date(Date.parse(start) + index * 60_000);
    await service.add("t", { userId: "talk", kind: "episode", content });
  }
  const context = createServiceContext({ store, now: () => now });
  return {
    /** The content of the first memory ranked for `question` with `switches`. */
    async first(question: string, switches: Partial<RetrievalFeatures>) {
      const ranked = await createSearchRanked(context, switches)(
        "t",
        { userId: "talk" },
        question,
        3,
        undefined,
      );
      return ranked[0]?.memory.content;
    },
    close: () => service.close(),
  };
}
