/**
 * A listing of a relation kind (`relations.list({ kind })`) is read whole only up to the read bound,
 * judged by the kind's count (ADR 0466). Relation kinds may be named like an Object member
 * (`constructor`, `toString`, `valueOf` match the schema's name pattern): the count is read as an own
 * value, so such a kind with no relations counts 0 and one past the bound is refused as any other.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import type { Paged, Pending } from "./lookup-batches.ts";
import { maxListedRelations, pageLookups } from "./page-lookups.ts";
import type { PageCounts } from "./row-source.ts";
import type { ReadPage, Wanted } from "./rows-on-demand.ts";

const paged: Paged = (query, onPage) => ({ lookup: query, done: () => onPage(undefined, true) });

/** What a listing of `kind` does under `counts`: the lookups it asks, and the page it records. */
async function listing(kind: string, relations: Record<string, number>) {
  const pages = new Map<string, ReadPage>();
  const asked: Pending[] = [];
  const counts: PageCounts = { entities: {}, relations };
  const wanted: [string, Wanted][] = [[`relations:${kind}`, { lookup: "relationPage", kind } as Wanted]];
  await pageLookups(wanted, paged, (entry) => asked.push(entry), {
    pages,
    countsNow: async () => counts,
  });
  return { asked, pages: [...pages.values()] };
}

for (const kind of ["constructor", "toString", "valueOf", "hasOwnProperty", "link"]) {
  it(`a relation kind "${kind}" counts by its own value`, async () => {
    // None of the kind: listed (the lookup finds nothing), no page refused, whatever Object holds.
    const none = await listing(kind, { other: 3 });
    assert.equal(none.asked.length, 1);
    assert.deepEqual(none.asked[0]?.lookup, { members: "relation", kinds: [kind], limit: 0 });
    assert.deepEqual(none.pages, []);
    // Past the bound: refused with its count, as any kind.
    const many = await listing(kind, { [kind]: maxListedRelations + 1 });
    assert.equal(many.asked.length, 0);
    assert.deepEqual(many.pages, [{ end: undefined, exhausted: false, tooMany: maxListedRelations + 1 }]);
  });
}
