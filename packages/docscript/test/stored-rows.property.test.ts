/**
 * A store's rows, members, counts and window index after random appends, against an oracle: the rows
 * written, projected by `membersOfRow`. On SQLite and PostgreSQL, each append 1-6 rows: writes of
 * fields with the row's members as they were beside (ADR 0496: moved numbers updated in place, the
 * members kept), some moving no number, numbers cleared and given back (the row's number fields
 * differ), an embedded marker renamed and a clip's content moved (its members differ), rows deleted
 * and written again, and writes with no previous members (written whole); every tenth append a shift of
 * every clip (PostgreSQL's statements made to probe its indexes). After every few appends:
 * every member, the counts per kind, windows on the markers' start and the rows, read back.
 *
 * `TACKLE_PROPERTY_ROUNDS` appends a store (default 150), from seed `TACKLE_PROPERTY_SEED` (default 7).
 * Counts are printed, so a run says what it exercised. `TACKLE_PROPERTY_ROUNDS=2000` on main at 9f980e4
 * (5 December 2026, 08:07 UTC, 58 s): both stores passed, 2,000 appends each (3,253 writes of fields,
 * 784 of them moving no number, 407 written whole; 243 numbers cleared, 225 given back; 589 markers
 * renamed, 759 contents moved; 823 rows deleted, 815 written again). Writing no moved number on
 * PostgreSQL fails it at append 40, not writing the payload of a fields-only row on SQLite at append 5.
 */
import assert from "node:assert/strict";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore, FoundMember, NumberRange, RowChange } from "../src/server/document-store.ts";
import { probeFrom } from "../src/server/postgres/postgres-row-writes.ts";
import { membersOfRow } from "../src/server/row-members.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { random } from "./lost-update-plans.ts";
import { createMemberDocument, readAllMembers } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const appends = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 150);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 7);
const { snapshot } = largeTimeline(160, 10);

interface ClipRow {
  slots: { content: string; marker: { id: string; kind: string; fields: Record<string, number | null> } };
  [key: string]: unknown;
}

/** A member as both the oracle and a store's read give it, but for its row's JSON. */
function memberLine(member: Omit<FoundMember, "json">): string {
  return JSON.stringify([
    member.type,
    member.id,
    member.kind,
    member.root,
    member.rowId,
    member.endpoint0 ?? null,
    member.endpoint1 ?? null,
    member.variantOf ?? null,
    member.identity ?? null,
  ]);
}

/** What the oracle's rows project to: members, counts, and the markers' start by id. */
function projected(rows: ReadonlyMap<string, unknown>) {
  const members: string[] = [];
  const counts = new Map<string, number>();
  const starts = new Map<string, number>();
  for (const [rowId, json] of rows) {
    for (const member of membersOfRow(timelineSchema, "entities", rowId, json)) {
      members.push(memberLine({ ...member, root: "entities", rowId }));
      const key = `${member.type}/${member.kind}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      const start = member.numbers?.startMs;
      if (member.kind === "sequence-marker" && typeof start === "number") starts.set(member.id, start);
    }
  }
  return { members: members.sort(), counts, starts };
}

async function checkStore(store: DocumentStore, rows: ReadonlyMap<string, unknown>, step: number) {
  const expected = projected(rows);
  const found = [
    ...(await readAllMembers(store, { type: "entity" }, 500)),
    ...(await readAllMembers(store, { type: "relation" }, 500)),
  ].filter((member) => member.root === "entities");
  assert.deepEqual(found.map(memberLine).sort(), expected.members, `members after append ${step}`);
  const counts = new Map<string, number>();
  for (const { type, kind, count } of await store.countMembers("doc")) {
    // The relations root's rows (a track's `contain`) are not written here: counted as they were.
    if (type === "relation" && kind === "contain") continue;
    counts.set(`${type}/${kind}`, count);
  }
  expected.counts.delete("relation/contain");
  assert.deepEqual(counts, expected.counts, `counts after append ${step}`);
  const lows = [...expected.starts.values()].sort((a, b) => a - b);
  const from = lows[Math.floor(lows.length / 3)];
  for (const range of [
    { field: "startMs" },
    { field: "startMs", from },
    { field: "startMs", to: from },
  ] as NumberRange[]) {
    const inWindow = await readAllMembers(store, { type: "entity", kinds: ["sequence-marker"], range }, 50);
    const want = [...expected.starts]
      .filter(([, start]) => start >= (range.from ?? -Infinity) && start < (range.to ?? Infinity))
      .map(([id]) => id)
      .sort();
    assert.deepEqual(
      inWindow.map((member) => member.id).sort(),
      want,
      `window ${JSON.stringify(range)} after append ${step}`,
    );
  }
  const stored = await store.readRows("doc", { root: "entities", limit: 10_000 });
  assert.deepEqual(
    new Map(stored.map((row) => [row.rowId, row.json])),
    new Map([...rows].filter(([, json]) => json !== undefined)),
    `rows after append ${step}`,
  );
}

/** What the appends have written so far, what is left to draw from, and what they exercised. */
interface Appending {
  readonly rows: Map<string, unknown>;
  /** Rows deleted, as they were: written again later, as a create writes them. */
  readonly deleted: Map<string, unknown>;
  readonly clipIds: readonly string[];
  readonly images: readonly string[];
  readonly next: (below: number) => number;
  readonly tally: Record<string, number>;
}

function newTally() {
  return {
    appends: 0,
    fields: 0,
    unmoved: 0,
    cleared: 0,
    restored: 0,
    renamed: 0,
    moved: 0,
    deleted: 0,
    recreated: 0,
    whole: 0,
    bulk: 0,
    bulkRows: Number.POSITIVE_INFINITY,
  };
}

/** Shifts every clip by one random amount, as a shift does: PostgreSQL probes its indexes for them. */
function shiftEveryClip(state: Appending, changes: Map<string, RowChange>): void {
  const { rows, tally } = state;
  const by = state.next(10_000) - 5_000;
  for (const rowId of state.clipIds) {
    const was = rows.get(rowId);
    if (was === undefined) continue;
    const row = structuredClone(was) as ClipRow;
    const fields = row.slots.marker.fields;
    if (typeof fields.startMs === "number") fields.startMs += by;
    changes.set(rowId, {
      root: "entities",
      rowId,
      json: row,
      members: membersOfRow(timelineSchema, "entities", rowId, row),
      previousMembers: membersOfRow(timelineSchema, "entities", rowId, was),
    });
    rows.set(rowId, row);
  }
  tally.bulk = (tally.bulk ?? 0) + 1;
  tally.bulkRows = Math.min(tally.bulkRows ?? Number.POSITIVE_INFINITY, changes.size);
}

/**
 * A live clip's row changed by `roll` (a field moved or not, cleared or given back, its marker renamed,
 * its content moved, or the row deleted); `json` undefined: deleted. `withWas`: sent with its members
 * as they were.
 */
function changedRow(
  state: Appending,
  was: unknown,
  roll: number,
  step: number,
): { json: unknown; withWas: boolean } {
  const { next, tally } = state;
  const row = structuredClone(was) as ClipRow;
  const fields = row.slots.marker.fields;
  const count = (key: string) => {
    tally[key] = (tally[key] ?? 0) + 1;
  };
  if (roll < 55) {
    const by = next(4) === 0 ? 0 : next(10_000) - 5_000;
    if (typeof fields.startMs === "number") fields.startMs += by;
    count("fields");
    if (by === 0) count("unmoved");
    const withWas = next(8) !== 0;
    if (!withWas) count("whole");
    return { json: row, withWas };
  }
  if (roll < 63) {
    if (fields.startMs === null) {
      fields.startMs = next(100_000);
      count("restored");
    } else {
      fields.startMs = null;
      count("cleared");
    }
  } else if (roll < 73) {
    row.slots.marker.id = `${row.slots.marker.id.replace(/-r\d+$/, "")}-r${step}`;
    count("renamed");
  } else if (roll < 85) {
    row.slots.content = state.images[next(state.images.length)] as string;
    count("moved");
  } else {
    return { json: undefined, withWas: true };
  }
  return { json: row, withWas: true };
}

/** Changes one to six random clips' rows (a deleted one is written again, as a create writes it). */
function changeSomeClips(state: Appending, changes: Map<string, RowChange>, step: number): void {
  const { rows, next, tally } = state;
  for (let count = 1 + next(6); count > 0; count--) {
    const rowId = state.clipIds[next(state.clipIds.length)] as string;
    if (changes.has(rowId)) continue;
    const was = rows.get(rowId);
    // Drawn for a deleted row too, so each seed plays the appends it always did.
    const roll = next(100);
    let json: unknown;
    let withWas = false;
    if (was === undefined) {
      json = state.deleted.get(rowId);
      tally.recreated = (tally.recreated ?? 0) + 1;
    } else {
      ({ json, withWas } = changedRow(state, was, roll, step));
      if (json === undefined) {
        state.deleted.set(rowId, was);
        tally.deleted = (tally.deleted ?? 0) + 1;
      }
    }
    changes.set(rowId, {
      root: "entities",
      rowId,
      json,
      members: membersOfRow(timelineSchema, "entities", rowId, json),
      ...(withWas && was !== undefined
        ? { previousMembers: membersOfRow(timelineSchema, "entities", rowId, was) }
        : {}),
    });
    if (json === undefined) rows.delete(rowId);
    else rows.set(rowId, json);
  }
}

describeOnBothStores(
  "stored rows after random appends, against an oracle of the rows written",
  "stored_rows",
  async (store) => {
    const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
    await createMemberDocument(store, snapshot, projection);
    const rows = new Map<string, unknown>([...projection.rowIds()].map((id) => [id, projection.rowJson(id)]));
    const tally = newTally();
    const state: Appending = {
      rows,
      deleted: new Map(),
      clipIds: [...rows.keys()].filter((id) => (rows.get(id) as ClipRow).slots?.marker !== undefined),
      images: [...rows.keys()].filter((id) => id.includes("image")),
      next: random(seed),
      tally,
    };
    for (let step = 1; step <= appends; step++) {
      const changes = new Map<string, RowChange>();
      // Every tenth append shifts every clip; the others change a few.
      if (step % 10 === 0) shiftEveryClip(state, changes);
      else changeSomeClips(state, changes, step);
      await store.append({
        documentId: "doc",
        seq: step,
        bytes: new Uint8Array([1]),
        status: "committed",
        rows: [...changes.values()],
        issues: [],
      });
      tally.appends++;
      if (step % 5 === 0 || step === appends) await checkStore(store, rows, step);
    }
    console.log(`stored rows property (seed ${seed}): ${JSON.stringify(tally)}`);
    assert.ok(
      tally.fields > 0 && tally.renamed > 0 && tally.deleted > 0 && tally.recreated > 0 && tally.bulk > 0,
      JSON.stringify(tally),
    );
    assert.ok(
      tally.bulkRows >= probeFrom,
      `every shift writes ${probeFrom} rows or more: ${JSON.stringify(tally)}`,
    );
  },
);
