/**
 * A fill's listings (ADR 0466, 0480, 0484): the lookups that read a listing's page from the store's
 * indexes (a window, a kind's entities after a cursor, a holder's ordered ends, the relations touching
 * an entity, a relation kind within the read bound), each recording the page once its answer is in.
 */
import { ownValue } from "../schema/own-keys.ts";
import {
  entityPageKey,
  orderedPageKey,
  relationPageKey,
  touchingPageKey,
  windowPageKey,
} from "./demand-keys.ts";
import type { Paged, Pending } from "./lookup-batches.ts";
import type { PageCounts } from "./row-source.ts";
import type { ReadPage, Wanted } from "./rows-on-demand.ts";

/** The most relations of a kind a listing reads (the read bound: more are read by entity). */
export const maxListedRelations = 20_000;

/** The listings' pages wanted (windows, entity pages, relations of a kind), each recorded once read. */
export async function pageLookups(
  wanted: readonly [string, Wanted][],
  paged: Paged,
  push: (entry: Pending) => void,
  listings: {
    readonly pages: Map<string, ReadPage>;
    readonly countsNow: () => Promise<PageCounts>;
  },
): Promise<void> {
  for (const [, entry] of wanted) {
    if (entry.lookup === "endpoint" || entry.lookup === "variants" || entry.lookup === "identity") continue;
    if (entry.lookup === "touchingPage") {
      // The first relations touching an entity: fewer than asked for is all of them.
      const key = touchingPageKey(entry.id, entry.count);
      push({
        lookup: { members: "relation", endpoint: entry.id, limit: entry.count },
        done: (result) =>
          listings.pages.set(key, { end: result.last, exhausted: result.found < entry.count }),
      });
    } else if (entry.lookup === "orderedPage") {
      // A holder's first (last) relations of a kind by position, from the store's index.
      const key = orderedPageKey(entry.kind, entry.holder, entry.from, entry.count);
      push({
        lookup: {
          members: "relation",
          ordered: { holder: entry.holder, kind: entry.kind, from: entry.from },
          limit: entry.count,
        },
        done: () => listings.pages.set(key, { end: undefined, exhausted: true }),
      });
    } else if (entry.lookup === "windowPage") {
      // The kind's entities in the window, from the store's index: every one of them up to the
      // page's end is held (the session checks each against the window as it sees it), with every row
      // claiming them and their variants (`claims`): a window is listed to be written, and its writes
      // look those up (two more requests a page before, a third of the shift's requests at 100k).
      const key = windowPageKey(entry.kind, entry.window, entry.after, entry.count);
      push(
        paged(
          { members: "entity", kinds: [entry.kind], range: entry.window, claims: true, limit: 0 },
          (end, exhausted) => listings.pages.set(key, { end, exhausted }),
          entry.count,
          entry.after,
        ),
      );
    } else if (entry.lookup === "entityPage") {
      // A kind's entities after a cursor, with every row claiming them: a listing reads each entity
      // it lists (`entitiesListed`), which asks its claims, then asked in a second request.
      const key = entityPageKey(entry.kind, entry.after, entry.count);
      push(
        paged(
          {
            members: "entity",
            ...(entry.kind === undefined ? {} : { kinds: [entry.kind] }),
            claims: true,
            limit: 0,
          },
          (end, exhausted) => listings.pages.set(key, { end, exhausted }),
          entry.count,
          entry.after,
        ),
      );
    } else if (entry.lookup === "relationPage") {
      const key = relationPageKey(entry.kind);
      const counts = await listings.countsNow();
      const total =
        entry.kind === undefined
          ? Object.values(counts.relations).reduce((sum, count) => sum + count, 0)
          : // Own counts only: a kind named like an Object member (`constructor`, `toString`) with no
            // relations would read back the inherited function, not 0.
            (ownValue(counts.relations, entry.kind) ?? 0);
      if (total > maxListedRelations) {
        listings.pages.set(key, { end: undefined, exhausted: false, tooMany: total });
        continue;
      }
      push(
        paged(
          { members: "relation", ...(entry.kind === undefined ? {} : { kinds: [entry.kind] }), limit: 0 },
          (end) => listings.pages.set(key, { end, exhausted: true }),
        ),
      );
    }
  }
}
