/**
 * How a fill's lookups are batched into requests (ADR 0466): many entities' relations, variants or
 * identities in one lookup, and what each lookup's answer completes.
 */
import { type KnownLookups, keyOf } from "./demand-keys.ts";
import type { RowLookup, RowSourceAnswer } from "./row-source.ts";
import type { Wanted } from "./rows-on-demand.ts";

/** Ids per lookup, members per page. */
export const idsPerLookup = 500;
export const membersPerPage = 5000;
/** Relations and variants read along with an entity looked up: answered whole below this many. */
export const speculativeLimit = 100;

/** Each lookup with what its answer completes: a key answered whole, or a listing's page. */
export type Pending = { lookup: RowLookup; done: (result: RowSourceAnswer["results"][number]) => void };
/** A listing's lookups in pages: at most `most` members after `startAfter`, `onPage` once read. */
export type Paged = (
  query: RowLookup & { members: string },
  onPage: (last: string | undefined, exhausted: boolean) => void,
  most?: number,
  startAfter?: string,
) => Pending;

/**
 * Relations by endpoint (of a kind, or all), variants and entities by identity: many entities' in one
 * lookup, each answered whole when the lookup's page is not full; those of a full one are asked
 * again one entity at a time, in pages (`push`), as a hub's relations are.
 */
export function manyAtOnce(
  wanted: readonly (readonly [string, Wanted])[],
  paged: Paged,
  push: (entry: Pending) => void,
): Pending[] {
  const found: Pending[] = [];
  const one = (entry: Wanted & { id: string }): Pending => {
    if (entry.lookup === "endpoint")
      return paged(
        {
          members: "relation",
          endpoint: entry.id,
          ...(entry.kind === undefined ? {} : { kinds: [entry.kind] }),
          limit: 0,
        },
        () => {},
      );
    if (entry.lookup === "variants")
      return paged({ members: "entity", variantOf: entry.id, limit: 0 }, () => {});
    return paged({ members: "entity", identity: entry.id, limit: 0 }, () => {});
  };
  const groups = new Map<string, (Wanted & { id: string })[]>();
  for (const [, entry] of wanted) {
    if (entry.lookup !== "endpoint" && entry.lookup !== "variants" && entry.lookup !== "identity") continue;
    const group = `${entry.lookup}\u0000${"kind" in entry ? (entry.kind ?? "") : ""}`;
    const members = groups.get(group);
    if (members === undefined) groups.set(group, [entry]);
    else members.push(entry);
  }
  for (const entries of groups.values()) {
    for (let start = 0; start < entries.length; start += idsPerLookup) {
      const chunk = entries.slice(start, start + idsPerLookup);
      const first = chunk[0] as Wanted & { id: string };
      const ids = chunk.map((entry) => entry.id);
      const kind = "kind" in first ? first.kind : undefined;
      const query: RowLookup =
        first.lookup === "endpoint"
          ? {
              members: "relation",
              endpoints: ids,
              ...(kind === undefined ? {} : { kinds: [kind] }),
              limit: membersPerPage,
            }
          : first.lookup === "variants"
            ? { members: "entity", variantsOf: ids, limit: membersPerPage }
            : { members: "entity", identities: ids, limit: membersPerPage };
      found.push({
        lookup: query,
        done: (result) => {
          if (result.found < membersPerPage) return;
          for (const entry of chunk) push(one(entry));
        },
      });
    }
  }
  return found;
}

/**
 * What a call on a few entities reads next: their relations and variants, whole if not full, a page of
 * `speculativeLimit` each (a hub's first page tells `touching` how many it has at least). `together`
 * (a walk's chunk of ends read ahead, ADR 0520): one lookup per kind for all of them, of
 * `speculativeLimit` members an entity up to a page, which a store answers with one statement where a
 * lookup an entity was one each (a chunk of 32 ends: 64). A full answer completes none of them (their
 * later reads ask again); a hub among them takes the others' share, so a call's own fill, which may
 * name a track, asks an entity at a time.
 */
export function speculativeLookups(
  { known, touching }: { readonly known: KnownLookups; readonly touching: Map<string, number> },
  entityIds: readonly string[],
  wantedKeys: ReadonlySet<string>,
  together = false,
): Pending[] {
  const pending: Pending[] = [];
  for (const lookup of ["endpoint", "variants"] as const) {
    const ids = entityIds.filter((id) => !known.has(keyOf(lookup, id)) && !wantedKeys.has(keyOf(lookup, id)));
    const groups: string[][] = [];
    if (!together) for (const id of ids) groups.push([id]);
    else
      for (let start = 0; start < ids.length; start += idsPerLookup)
        groups.push(ids.slice(start, start + idsPerLookup));
    for (const group of groups) {
      const [one] = group as [string];
      const limit = Math.min(speculativeLimit * group.length, membersPerPage);
      const query: RowLookup =
        lookup === "endpoint"
          ? { members: "relation", ...(group.length === 1 ? { endpoint: one } : { endpoints: group }), limit }
          : {
              members: "entity",
              ...(group.length === 1 ? { variantOf: one } : { variantsOf: group }),
              limit,
            };
      pending.push({
        lookup: query,
        done: (result) => {
          if (result.found < limit) for (const id of group) known.add(keyOf(lookup, id));
          else if (lookup === "endpoint" && group.length === 1) touching.set(one, result.found);
        },
      });
    }
  }
  return pending;
}
