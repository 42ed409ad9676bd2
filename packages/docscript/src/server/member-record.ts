/** A member as both stores' queries return it, and the `FoundMember` it stands for. */
import type { FoundMember, RowRoot } from "./document-store.ts";

export interface MemberRecord {
  type: "entity" | "relation";
  member_id: string;
  kind: string;
  root: RowRoot;
  row_id: string;
  endpoint0: string | null;
  endpoint1: string | null;
  variant_of: string | null;
  identity: string | null;
  /** Null when the query did not join the rows (`MemberQuery.bare`). */
  payload: string | null;
}

/** A member as a query found it (both stores). */
export function toMember(record: MemberRecord): FoundMember {
  return {
    type: record.type,
    id: record.member_id,
    kind: record.kind,
    root: record.root,
    rowId: record.row_id,
    json: record.payload === null ? undefined : JSON.parse(record.payload),
    ...(record.endpoint0 === null ? {} : { endpoint0: record.endpoint0 }),
    ...(record.endpoint1 === null ? {} : { endpoint1: record.endpoint1 }),
    ...(record.variant_of === null ? {} : { variantOf: record.variant_of }),
    ...(record.identity === null ? {} : { identity: record.identity }),
  };
}

/** The number-field entries of a row's members, one per (member, field), for the window index. */
export function numberEntries(
  members: readonly {
    type: string;
    id: string;
    kind: string;
    numbers?: Readonly<Record<string, number | null>>;
  }[],
): { memberId: string; kind: string; field: string; value: number | null }[] {
  const entries: { memberId: string; kind: string; field: string; value: number | null }[] = [];
  for (const member of members) {
    if (member.type !== "entity" || member.numbers === undefined) continue;
    for (const [field, value] of Object.entries(member.numbers))
      entries.push({ memberId: member.id, kind: member.kind, field, value });
  }
  return entries;
}
