/**
 * What a page, rows or pull request asks for, read from its query string or body; each answer, or what
 * is wrong.
 */
import type { NumberRange, OrderedQuery } from "./document-store.ts";
import { type RowLookup, rowLookupLimits } from "./row-reads.ts";

/** A page's query: ?kind=…&id=… (repeatable), after (the last id of the previous page), limit (0–1000; default 100). */
export const pageQuery = (context: {
  req: { query(name: string): string | undefined; queries(name: string): string[] | undefined };
}) => {
  const kinds = context.req.queries("kind");
  const ids = context.req.queries("id");
  const after = context.req.query("after");
  const asked = Math.floor(Number(context.req.query("limit") ?? 100));
  // 0 answers only the version, totals and issues.
  const limit = Math.min(Math.max(Number.isNaN(asked) ? 100 : asked, 0), 1000);
  return {
    ...(kinds === undefined ? {} : { kinds }),
    ...(ids === undefined ? {} : { ids }),
    ...(after === undefined ? {} : { after }),
    limit,
  };
};

/** A pull's `waitMs`: how long it may wait for the next push, 0 to 25 s (0 when absent or not a number). */
export const waitMsOf = (text: string | undefined): number =>
  Math.min(Math.max(Number(text ?? 0) || 0, 0), 25_000);

const isText = (value: unknown): value is string => typeof value === "string";
const isTexts = (value: unknown, most: number): value is string[] =>
  Array.isArray(value) && value.length <= most && value.every(isText);

/** A lookup's window on a number field, or what is wrong with it. */
function rangeOf(value: unknown): NumberRange | undefined | string {
  if (value === undefined) return undefined;
  const range = value as Record<string, unknown>;
  if (typeof value !== "object" || value === null || !isText(range.field))
    return "range is { field, from?, to? } with field a string";
  for (const bound of ["from", "to"] as const)
    if (range[bound] !== undefined && !(typeof range[bound] === "number" && Number.isFinite(range[bound])))
      return `range.${bound} is a finite number`;
  return {
    field: range.field,
    ...(range.from === undefined ? {} : { from: range.from as number }),
    ...(range.to === undefined ? {} : { to: range.to as number }),
  };
}

/** A lookup's ordered relations of one holder, or what is wrong with it. */
function orderedOf(value: unknown): OrderedQuery | undefined | string {
  if (value === undefined) return undefined;
  const ordered = value as Record<string, unknown>;
  if (
    typeof value !== "object" ||
    value === null ||
    !isText(ordered.holder) ||
    !isText(ordered.kind) ||
    (ordered.from !== "first" && ordered.from !== "last")
  )
    return 'ordered is { holder, kind, from: "first" | "last" } with holder and kind strings';
  return { holder: ordered.holder, kind: ordered.kind, from: ordered.from };
}

/** The lookups of a `rows` request, or what is wrong with them. */
export function rowLookupsOf(value: unknown): RowLookup[] | string {
  const { lookups: mostLookups, ids: mostIds, members: mostMembers } = rowLookupLimits;
  if (!Array.isArray(value) || value.length > mostLookups)
    return `lookups is a list of at most ${mostLookups} lookups`;
  const lookups: RowLookup[] = [];
  for (const raw of value as Record<string, unknown>[]) {
    if (typeof raw !== "object" || raw === null) return "each lookup is an object";
    if (raw.rows === "entities" || raw.rows === "relations") {
      if (!isTexts(raw.ids, mostIds)) return `a rows lookup names at most ${mostIds} ids`;
      lookups.push({ rows: raw.rows, ids: raw.ids });
      continue;
    }
    if (raw.members !== "entity" && raw.members !== "relation")
      return 'each lookup names rows ("entities" or "relations") or members ("entity" or "relation")';
    const limit = raw.limit;
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > mostMembers)
      return `a members lookup's limit is a whole number from 1 to ${mostMembers}`;
    for (const name of ["kinds", "ids", "endpoints", "variantsOf", "identities"] as const)
      if (raw[name] !== undefined && !isTexts(raw[name], mostIds))
        return `${name} is a list of at most ${mostIds} strings`;
    for (const name of ["endpoint", "variantOf", "identity", "after"] as const)
      if (raw[name] !== undefined && !isText(raw[name])) return `${name} is a string`;
    if (raw.bare !== undefined && typeof raw.bare !== "boolean") return "bare is true or false";
    if (raw.claims !== undefined && typeof raw.claims !== "boolean") return "claims is true or false";
    if (raw.claims === true && raw.members !== "entity") return "claims reads entities";
    const range = rangeOf(raw.range);
    if (typeof range === "string") return range;
    if (range !== undefined && raw.members !== "entity") return "a range reads entities";
    const ordered = orderedOf(raw.ordered);
    if (typeof ordered === "string") return ordered;
    if (ordered !== undefined && raw.members !== "relation") return "ordered reads relations";
    lookups.push({
      members: raw.members,
      limit,
      ...(raw.kinds === undefined ? {} : { kinds: raw.kinds as string[] }),
      ...(raw.ids === undefined ? {} : { ids: raw.ids as string[] }),
      ...(raw.endpoints === undefined ? {} : { endpoints: raw.endpoints as string[] }),
      ...(raw.variantsOf === undefined ? {} : { variantsOf: raw.variantsOf as string[] }),
      ...(raw.identities === undefined ? {} : { identities: raw.identities as string[] }),
      ...(raw.endpoint === undefined ? {} : { endpoint: raw.endpoint as string }),
      ...(raw.variantOf === undefined ? {} : { variantOf: raw.variantOf as string }),
      ...(raw.identity === undefined ? {} : { identity: raw.identity as string }),
      ...(raw.after === undefined ? {} : { after: raw.after as string }),
      ...(range === undefined ? {} : { range }),
      ...(ordered === undefined ? {} : { ordered }),
      ...(raw.bare === true ? { bare: true } : {}),
      ...(raw.claims === true ? { claims: true } : {}),
    });
  }
  return lookups;
}
