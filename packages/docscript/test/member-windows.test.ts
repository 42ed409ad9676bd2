/**
 * A store reads the entities of a kind in a window on a number field from its index (`readMembers` with
 * `range`, migration 7): the same markers as a scan of the document, in id order and in pages, kept in
 * step by a write that moves one; a document stored before the index answers every marker (each a
 * candidate) until a server has indexed it from its stored rows. On SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createTestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore, MemberQuery, NumberRange } from "../src/server/document-store.ts";
import { createSqliteDocumentStore, DocumentHost } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { membersOfRow } from "../src/server/row-members.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { createMemberDocument, readAllMembers } from "./member-store.ts";

const { snapshot } = largeTimeline(120, 10);
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
const markers = [...projection.entities("sequence-marker")];

/** The markers starting in [from, to), as a scan of the document finds them, in id order. */
function scanned(range: NumberRange): string[] {
  return markers
    .filter((marker) => {
      const start = marker.payload[range.field] as number;
      return (
        start >= (range.from ?? Number.NEGATIVE_INFINITY) && start < (range.to ?? Number.POSITIVE_INFINITY)
      );
    })
    .map((marker) => marker.entityId)
    .sort();
}

/** The ids of every member a query finds, a page of `limit` at a time. */
const readAll = async (store: DocumentStore, query: Omit<MemberQuery, "after" | "limit">, limit = 7) =>
  (await readAllMembers(store, query, limit)).map((member) => member.id);

const window = (range: NumberRange) =>
  ({ type: "entity", kinds: ["sequence-marker"], range }) as const satisfies Omit<MemberQuery, "limit">;

/**
 * Appends one `entities` row as a push stores it: with `was` (the row as it was), as a push of fields
 * writes it, its members as they were beside (ADR 0496).
 */
async function appendRow(store: DocumentStore, seq: number, rowId: string, json: unknown, was?: unknown) {
  await store.append({
    documentId: "doc",
    seq,
    bytes: new Uint8Array([seq]),
    status: "committed",
    rows: [
      {
        root: "entities",
        rowId,
        json,
        members: membersOfRow(timelineSchema, "entities", rowId, json),
        ...(was === undefined
          ? {}
          : { previousMembers: membersOfRow(timelineSchema, "entities", rowId, was) }),
      },
    ],
    issues: [],
  });
}

async function checkWindows(store: DocumentStore) {
  await createMemberDocument(store, snapshot, projection);
  assert.equal(await store.numbersIndexed("doc"), true);
  for (const range of [
    { field: "startMs", from: 30_000, to: 60_000 },
    { field: "startMs", from: 100_000 },
    { field: "startMs", to: 5_000 },
    { field: "startMs" },
    { field: "startMs", from: 10_000_000 },
  ]) {
    const expected = scanned(range);
    assert.deepEqual(await readAll(store, window(range)), expected, JSON.stringify(range));
    assert.deepEqual(await readAll(store, window(range), 5000), expected, JSON.stringify(range));
  }
  assert.ok(scanned({ field: "startMs", from: 30_000, to: 60_000 }).length > 0, "the window holds markers");
  // The other filters narrow what the window found, on both stores: none of these markers is a variant
  // or has an identity.
  for (const narrowed of [{ variantsOf: ["no-such-base"] }, { identities: ["no-such-identity"] }])
    assert.deepEqual(
      await readAll(store, { ...window({ field: "startMs" }), ...narrowed }),
      [],
      JSON.stringify(narrowed),
    );
  // Rows of other kinds, and fields that are not numbers, are not in a window.
  assert.deepEqual(
    await readAll(store, { type: "entity", kinds: ["clip"], range: { field: "startMs", from: 0 } }),
    [],
  );
  // A write that moves a marker out of the window and another into it: the window follows.
  const [first] = scanned({ field: "startMs", from: 30_000, to: 60_000 });
  const moved = markers.find((marker) => marker.entityId === first);
  assert.ok(moved !== undefined);
  const rowId = projection.stored(moved.entityId)?.rowId ?? "";
  const row = structuredClone(projection.rowJson(rowId)) as {
    slots: { marker: { fields: { startMs: number } } };
  };
  row.slots.marker.fields.startMs = 1_000_000;
  await appendRow(store, 1, rowId, row);
  assert.deepEqual(
    await readAll(store, window({ field: "startMs", from: 30_000, to: 60_000 })),
    scanned({ field: "startMs", from: 30_000, to: 60_000 }).filter((id) => id !== first),
  );
  assert.deepEqual(await readAll(store, window({ field: "startMs", from: 999_999, to: 1_000_001 })), [first]);
  // A write of a number alone, as a push of fields makes it (with the row's members as they were):
  // the number moves in place (ADR 0496), and the window follows.
  const second = scanned({ field: "startMs", from: 30_000, to: 60_000 }).find((id) => id !== first);
  const secondRowId = projection.stored(second ?? "")?.rowId ?? "";
  const was = projection.rowJson(secondRowId);
  const shifted = structuredClone(was) as { slots: { marker: { fields: { startMs: number } } } };
  shifted.slots.marker.fields.startMs = 2_000_000;
  await appendRow(store, 2, secondRowId, shifted, was);
  assert.deepEqual(
    await readAll(store, window({ field: "startMs", from: 30_000, to: 60_000 })),
    scanned({ field: "startMs", from: 30_000, to: 60_000 }).filter((id) => id !== first && id !== second),
  );
  assert.deepEqual(await readAll(store, window({ field: "startMs", from: 1_999_999, to: 2_000_001 })), [
    second,
  ]);
  assert.deepEqual(await readAll(store, window({ field: "startMs", from: 999_999, to: 1_000_001 })), [first]);
  // A write that leaves a number field holding no number, with the row's members as they were: the
  // marker's number goes (the row's numbers are not the same fields any more), it is in no window.
  const third = scanned({ field: "startMs", from: 30_000, to: 60_000 }).find(
    (id) => id !== first && id !== second,
  );
  const thirdRowId = projection.stored(third ?? "")?.rowId ?? "";
  const thirdWas = projection.rowJson(thirdRowId);
  const cleared = structuredClone(thirdWas) as { slots: { marker: { fields: { startMs: number | null } } } };
  cleared.slots.marker.fields.startMs = null;
  await appendRow(store, 3, thirdRowId, cleared, thirdWas);
  assert.ok(third !== undefined);
  assert.equal((await readAll(store, window({ field: "startMs" }), 5000)).includes(third), false);
  assert.deepEqual(
    await readAll(store, window({ field: "startMs", from: 30_000, to: 60_000 })),
    scanned({ field: "startMs", from: 30_000, to: 60_000 }).filter(
      (id) => ![first, second, third].includes(id),
    ),
  );
}

/** A document whose numbers are not indexed (as one stored before migration 7), then indexed by a server. */
async function checkIndexedLater(store: DocumentStore, forget: () => Promise<void>) {
  await createMemberDocument(store, snapshot, projection);
  await forget();
  assert.equal(await store.numbersIndexed("doc"), false);
  const range = { field: "startMs", from: 30_000, to: 60_000 };
  // Not indexed: every marker is a candidate (the reader checks each against the window).
  assert.deepEqual(await readAll(store, window(range), 5000), scanned({ field: "startMs" }));
  const host = new DocumentHost({ store, schema: timelineSchema });
  await host.snapshot("doc");
  await host.close();
  assert.equal(await store.numbersIndexed("doc"), true);
  assert.deepEqual(await readAll(store, window(range)), scanned(range));
}

describe("readMembers in a window on a number field", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-windows-"));
  const databases: { drop(): Promise<void> }[] = [];
  after(async () => {
    rmSync(directory, { recursive: true, force: true });
    for (const database of databases) await database.drop();
  });

  it("SQLite", async () => {
    const store = createSqliteDocumentStore({ path: join(directory, "d.sqlite") });
    try {
      await checkWindows(store);
    } finally {
      await store.close();
    }
  });

  it("SQLite: a document stored before the index is indexed when a server opens it", async () => {
    const path = join(directory, "later.sqlite");
    const store = createSqliteDocumentStore({ path });
    try {
      await checkIndexedLater(store, async () => {
        const { DatabaseSync } = await import("node:sqlite");
        const database = new DatabaseSync(path);
        database.exec("DELETE FROM docscript_numbers; UPDATE docscript_projection SET numbers_indexed = 0;");
        database.close();
      });
    } finally {
      await store.close();
    }
  });

  it("PostgreSQL", async () => {
    const database = await createTestDatabase("docscript_member_windows");
    databases.push(database);
    const store = await createPostgresDocumentStore({ connectionString: database.url });
    try {
      await checkWindows(store);
    } finally {
      await store.close();
    }
  });

  it("PostgreSQL: a document stored before the index is indexed when a server opens it", async () => {
    const database = await createTestDatabase("docscript_member_windows_later");
    databases.push(database);
    const store = await createPostgresDocumentStore({ connectionString: database.url });
    try {
      await checkIndexedLater(store, async () => {
        const { default: pg } = await import("pg");
        const client = new pg.Client({ connectionString: database.url });
        await client.connect();
        await client.query("DELETE FROM docscript_numbers");
        await client.query("UPDATE docscript_projection SET numbers_indexed = false");
        await client.end();
      });
    } finally {
      await store.close();
    }
  });
});
