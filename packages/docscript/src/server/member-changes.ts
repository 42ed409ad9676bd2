/**
 * What a row's write changes in its members, for both stores' writes (ADR 0496): a row that projects
 * to the members it did before but for their numbers (a write of fields: a shift's 33,000 markers)
 * keeps its members and index entries, and only the numbers that moved are updated in place.
 */
import type { RowChange, RowMember } from "./document-store.ts";
import { numberEntries } from "./member-record.ts";

/** One number-field entry of a member, as the window index holds it. */
export type NumberEntry = ReturnType<typeof numberEntries>[number];

/** What a member is, but for its numbers. */
function memberKey(member: RowMember): string {
  return JSON.stringify([
    member.type,
    member.id,
    member.kind,
    member.endpoint0 ?? null,
    member.endpoint1 ?? null,
    member.variantOf ?? null,
    member.identity ?? null,
  ]);
}

/** Whether two members are one but for their numbers. */
function sameMember(left: RowMember, right: RowMember): boolean {
  return (
    left.type === right.type &&
    left.id === right.id &&
    left.kind === right.kind &&
    (left.endpoint0 ?? null) === (right.endpoint0 ?? null) &&
    (left.endpoint1 ?? null) === (right.endpoint1 ?? null) &&
    (left.variantOf ?? null) === (right.variantOf ?? null) &&
    (left.identity ?? null) === (right.identity ?? null)
  );
}

/** A row kept that projects to the members it projected to before, but for their numbers. */
export function sameButNumbers(change: RowChange): boolean {
  const previous = change.previousMembers;
  const members = change.members ?? [];
  if (change.json === undefined || previous === undefined || previous.length !== members.length) return false;
  // Read from one row shape twice, they come in one order (a shift's 33,000 rows): no keys made.
  if (previous.every((member, index) => sameMember(member, members[index] as RowMember))) return true;
  const before = previous.map(memberKey).sort();
  const after = members.map(memberKey).sort();
  return before.every((key, index) => key === after[index]);
}

/** A row's number entries by member and field; undefined when one comes twice. */
function entriesByKey(members: readonly RowMember[]): Map<string, NumberEntry> | undefined {
  const entries = new Map<string, NumberEntry>();
  for (const entry of numberEntries(members)) {
    const key = `${entry.memberId}\u0000${entry.field}`;
    if (entries.has(key)) return undefined;
    entries.set(key, entry);
  }
  return entries;
}

/**
 * The numbers that moved, as [member, field, value], when the members come in one order before and
 * after, each id once, with the same number fields (a shift's 33,000 rows, read from one row shape
 * twice): found without a key made per number. Undefined otherwise: `movedNumbers` compares by key.
 */
function alignedNumbers(
  before: readonly RowMember[],
  after: readonly RowMember[],
): [string, string, number | null][] | undefined {
  if (before.length !== after.length) return undefined;
  const moved: [string, string, number | null][] = [];
  for (let index = 0; index < after.length; index++) {
    const left = before[index] as RowMember;
    const right = after[index] as RowMember;
    if (left.type !== right.type || left.id !== right.id) return undefined;
    // Each id once: a row naming one twice keeps its first, which a by-key comparison finds.
    for (let other = 0; other < index; other++)
      if ((after[other] as RowMember).id === right.id) return undefined;
    if (right.type !== "entity" || (left.numbers === undefined && right.numbers === undefined)) continue;
    const was = left.numbers ?? {};
    const now = right.numbers ?? {};
    const fields = Object.keys(now);
    if (fields.length !== Object.keys(was).length) return undefined;
    for (const field of fields) {
      if (!Object.hasOwn(was, field)) return undefined;
      const value = now[field] as number | null;
      if (was[field] !== value) moved.push([right.id, field, value]);
    }
  }
  return moved;
}

/**
 * A row's numbers that moved, as [member, field, value] to update in place, when it holds the same
 * number fields as before and only their values moved (a shift's markers). A member the row does not
 * hold has no numbers under it, and its update changes nothing. Undefined when the fields differ or a
 * member comes twice: the row's numbers are written again then.
 */
export function movedNumbers(change: RowChange): [string, string, number | null][] | undefined {
  const aligned = alignedNumbers(change.previousMembers ?? [], change.members ?? []);
  if (aligned !== undefined) return aligned;
  const before = entriesByKey(change.previousMembers ?? []);
  const after = entriesByKey(change.members ?? []);
  if (before === undefined || after === undefined || before.size !== after.size) return undefined;
  for (const key of after.keys()) if (!before.has(key)) return undefined;
  const moved: [string, string, number | null][] = [];
  for (const [key, entry] of after)
    if (before.get(key)?.value !== entry.value) moved.push([entry.memberId, entry.field, entry.value]);
  return moved;
}
