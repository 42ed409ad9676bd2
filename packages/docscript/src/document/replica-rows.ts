/**
 * The tool's local replica as a row source (ADR 0485): the lookups a document server answers from its
 * store, answered from a projection that holds every row (the replica's, read whole). Members come in
 * id order, as the store's do, each with the row it lives in.
 */
import type { RowRoot } from "../server/document-store.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import type { Projection } from "./projection.ts";
import { compareIds, compareRelations } from "./row-shape.ts";
import type { RowLookup, RowSource, RowSourceAnswer } from "./row-source.ts";

type Member = { readonly id: string; readonly root: RowRoot; readonly rowId: string };
type MembersLookup = Extract<RowLookup, { members: string }>;

/** The entity members a lookup finds, in id order: one per row claiming the id. */
function entityMembers(projection: Projection, lookup: MembersLookup): Member[] {
  const variantsOf = lookup.variantsOf ?? (lookup.variantOf === undefined ? undefined : [lookup.variantOf]);
  const identities = lookup.identities ?? (lookup.identity === undefined ? undefined : [lookup.identity]);
  const ids =
    lookup.ids ??
    (identities === undefined
      ? [...projection.entityIds()]
      : identities.flatMap((key) => [...projection.entityIdsWithIdentity(key)]));
  const kinds = lookup.kinds === undefined ? undefined : new Set(lookup.kinds);
  const variantBases = variantsOf === undefined ? undefined : new Set(variantsOf);
  const found: Member[] = [];
  for (const id of new Set(ids))
    for (const claim of projection.claimsOf(id)) {
      if (kinds !== undefined && !kinds.has(claim.entityKind)) continue;
      if (variantBases !== undefined && (claim.variantOf === undefined || !variantBases.has(claim.variantOf)))
        continue;
      found.push({ id, root: ENTITIES, rowId: claim.rowId });
    }
  return found;
}

/** The relation members a lookup finds, in id order: a slot relation lives in its holder's row. */
function relationMembers(projection: Projection, lookup: MembersLookup): Member[] {
  const endpoints = lookup.endpoints ?? (lookup.endpoint === undefined ? undefined : [lookup.endpoint]);
  const ids =
    lookup.ids ??
    (endpoints === undefined
      ? [...projection.relationIds()]
      : endpoints.flatMap((endpoint) => [...projection.relationIdsOf(endpoint)]));
  const kinds = lookup.kinds === undefined ? undefined : new Set(lookup.kinds);
  const found: Member[] = [];
  for (const id of new Set(ids))
    for (const claim of projection.relationClaimsOf(id)) {
      if (kinds !== undefined && !kinds.has(claim.relationKind)) continue;
      found.push(
        claim.slot === undefined
          ? { id, root: RELATIONS, rowId: id }
          : { id, root: ENTITIES, rowId: claim.endpoint0EntityId },
      );
    }
  return found;
}

/** A holder's ordered relations of a kind, from its first or its last (`MemberQuery.ordered`). */
function orderedMembers(projection: Projection, lookup: MembersLookup): Member[] {
  const ordered = lookup.ordered;
  if (ordered === undefined) return [];
  const held = projection
    .storedRelationsOf(ordered.holder, ordered.kind)
    .filter((relation) => relation.endpoint0EntityId === ordered.holder && relation.slot === undefined)
    .sort(compareRelations);
  if (ordered.from === "last") held.reverse();
  return held
    .slice(0, lookup.limit)
    .map((relation) => ({ id: relation.relationId, root: RELATIONS, rowId: relation.relationId }));
}

export function replicaRowSource(projection: Projection, version: string): RowSource {
  const json = (root: RowRoot, rowId: string): unknown =>
    root === ENTITIES ? projection.rowJson(rowId) : projection.relationJson(rowId);
  const answer = (lookup: RowLookup): RowSourceAnswer["results"][number] => {
    if ("rows" in lookup) {
      const rows = lookup.ids.flatMap((rowId) => {
        const found = json(lookup.rows, rowId);
        return found === undefined ? [] : [{ root: lookup.rows, rowId, json: found }];
      });
      return { rows, found: rows.length };
    }
    const members =
      lookup.ordered !== undefined
        ? orderedMembers(projection, lookup)
        : (lookup.members === "entity" ? entityMembers : relationMembers)(projection, lookup)
            .filter((member) => lookup.after === undefined || member.id > lookup.after)
            .sort((left, right) => compareIds(left.id, right.id))
            .slice(0, lookup.limit);
    const rows = new Map<string, { root: RowRoot; rowId: string; json?: unknown }>();
    for (const member of members)
      rows.set(
        `${member.root}\u0000${member.rowId}`,
        lookup.bare === true
          ? { root: member.root, rowId: member.rowId }
          : { root: member.root, rowId: member.rowId, json: json(member.root, member.rowId) },
      );
    // Every row claiming the entities found and their variants, as lookups of their ids and variants
    // read them (`claims`).
    const claimed =
      lookup.claims === true && lookup.members === "entity"
        ? [...new Set(members.map((member) => member.id))]
        : undefined;
    for (const member of claimed === undefined
      ? []
      : [
          ...entityMembers(projection, { members: "entity", ids: claimed, limit: claimed.length }),
          ...entityMembers(projection, { members: "entity", variantsOf: claimed, limit: claimed.length }),
        ])
      if (!rows.has(`${member.root}\u0000${member.rowId}`))
        rows.set(
          `${member.root}\u0000${member.rowId}`,
          lookup.bare === true
            ? { root: member.root, rowId: member.rowId }
            : { root: member.root, rowId: member.rowId, json: json(member.root, member.rowId) },
        );
    const last = members.at(-1)?.id;
    return {
      rows: [...rows.values()],
      found: members.length,
      ...(last === undefined ? {} : { last }),
      ...(claimed === undefined ? {} : { claimed }),
    };
  };
  return {
    async lookUp(lookups) {
      return { version, results: lookups.map(answer) };
    },
  };
}
