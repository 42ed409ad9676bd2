/**
 * The stores' container index (ADR 0514): where each map of a row sits, written with the row and read
 * by container id. A stale entry would send the server to a wrong row, so every way a row is written
 * is checked: entries given replace the row's, `"kept"` keeps them, a row written without them or
 * deleted forgets them, replaced rows forget all; on SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { underLoadMs } from "@tackle/test-support";
import type {
  ContainerEntry,
  ContainerPlace,
  DocumentStore,
  RowChange,
} from "../src/server/document-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const clip = (rowId: string, containers?: RowChange["containers"]): RowChange => ({
  root: "entities",
  rowId,
  json: { kind: "clip", name: rowId },
  ...(containers === undefined ? {} : { containers }),
});

/** A clip row's own map and its `fields` map, by ids made of the row's id and `tag`. */
const mapsOf = (rowId: string, tag = "a"): ContainerEntry[] => [
  [`cid:${rowId}:${tag}`, []],
  [`cid:${rowId}:${tag}/fields`, ["fields"]],
];

async function create(store: DocumentStore, documentId: string, rows: readonly RowChange[]): Promise<void> {
  assert.equal(
    await store.createDocument({ documentId, tokenHash: "h", snapshot: new Uint8Array([1]), rows }),
    true,
  );
}

/** Appends the next update with `rows`; the rows hold through the last one, so they advance. */
async function append(
  store: DocumentStore,
  documentId: string,
  rows?: readonly RowChange[],
): Promise<number> {
  const seq = ((await store.rowsSeq(documentId)) ?? 0) + 1;
  const written = rows === undefined ? {} : { rows, issues: [] };
  await store.append({ documentId, seq, bytes: new Uint8Array([seq]), status: "committed", ...written });
  if (rows !== undefined) assert.equal(await store.rowsSeq(documentId), seq, "the rows advanced");
  return seq;
}

async function places(store: DocumentStore, documentId: string, ids: readonly string[]) {
  assert.ok(store.containerPlaces !== undefined, "the store keeps the container index");
  return Object.fromEntries(await store.containerPlaces(documentId, ids));
}

const at = (
  rowId: string,
  path: string[] = [],
  root: ContainerPlace["root"] = "entities",
): ContainerPlace => ({
  root,
  rowId,
  path,
});

async function checkWrites(store: DocumentStore) {
  const relation: RowChange = {
    root: "relations",
    rowId: "r1",
    json: { kind: "contain", endpoint0: "c1", endpoint1: "c2" },
    containers: [["cid:r1", []]],
  };
  await create(store, "doc", [clip("c1", mapsOf("c1")), clip("c2", mapsOf("c2")), relation]);
  const asked = ["cid:c1:a", "cid:c1:a/fields", "cid:c2:a", "cid:r1", "cid:unknown"];
  assert.deepEqual(
    await places(store, "doc", asked),
    {
      "cid:c1:a": at("c1"),
      "cid:c1:a/fields": at("c1", ["fields"]),
      "cid:c2:a": at("c2"),
      "cid:r1": at("r1", [], "relations"),
    },
    "createDocument's entries, ids not held absent",
  );
  assert.deepEqual(await places(store, "doc", []), {});

  // An append: a new row's maps, one deep path; rows kept keep theirs.
  await append(store, "doc", [
    clip("c1", "kept"),
    clip("c3", [
      ["cid:c3", []],
      ["cid:c3/a/b", ["a", "b"]],
    ]),
  ]);
  assert.deepEqual(await places(store, "doc", ["cid:c1:a", "cid:c1:a/fields", "cid:c3", "cid:c3/a/b"]), {
    "cid:c1:a": at("c1"),
    "cid:c1:a/fields": at("c1", ["fields"]),
    "cid:c3": at("c3"),
    "cid:c3/a/b": at("c3", ["a", "b"]),
  });

  // Written without `containers`: not known, so forgotten. A new array replaces the old entries.
  await append(store, "doc", [clip("c1"), clip("c2", mapsOf("c2", "b"))]);
  assert.deepEqual(
    await places(store, "doc", [...asked, "cid:c2:b", "cid:c2:b/fields"]),
    {
      "cid:c2:b": at("c2"),
      "cid:c2:b/fields": at("c2", ["fields"]),
      "cid:r1": at("r1", [], "relations"),
    },
    "c1's forgotten, c2's old ids gone",
  );

  // A deleted row's entries go, "kept" or not; the relation's too.
  await append(store, "doc", [
    { root: "entities", rowId: "c3", json: undefined, containers: "kept" },
    { root: "relations", rowId: "r1", json: undefined },
  ]);
  assert.deepEqual(await places(store, "doc", ["cid:c3", "cid:c3/a/b", "cid:r1", "cid:c2:b"]), {
    "cid:c2:b": at("c2"),
  });

  // Rows replaced: every entry forgotten (c2's, a row not given), the given ones written.
  assert.equal(
    await store.replaceRows("doc", (await store.rowsSeq("doc")) ?? -1, [clip("c1", mapsOf("c1", "z"))], []),
    true,
  );
  assert.deepEqual(
    await places(store, "doc", ["cid:c1:a", "cid:c2:b", "cid:c2:b/fields", "cid:c1:z", "cid:c1:z/fields"]),
    { "cid:c1:z": at("c1"), "cid:c1:z/fields": at("c1", ["fields"]) },
  );

  // advanceRows writes them as an append does.
  const seq = await append(store, "doc");
  assert.equal(
    await store.advanceRows("doc", seq, [clip("c1", "kept"), clip("c2", [["cid:c2:y", []]])], []),
    true,
  );
  assert.deepEqual(await places(store, "doc", ["cid:c1:z", "cid:c2:y"]), {
    "cid:c1:z": at("c1"),
    "cid:c2:y": at("c2"),
  });

  // A map another row names (never in Loro, where a map does not move) is where it was named last: the
  // append is not refused as another writer's.
  await append(store, "doc", [clip("c2", [["cid:c1:z", ["moved"]]])]);
  assert.deepEqual(await places(store, "doc", ["cid:c1:z", "cid:c2:y"]), { "cid:c1:z": at("c2", ["moved"]) });
}

async function checkDocumentsApart(store: DocumentStore) {
  await create(store, "doc", [clip("c1", mapsOf("c1"))]);
  // The same row ids and one shared container id in another document: each sees its own.
  await create(store, "other", [clip("c1", [["cid:c1:a", ["elsewhere"]]]), clip("o1", mapsOf("o1"))]);
  assert.deepEqual(await places(store, "doc", ["cid:c1:a", "cid:o1:a", "cid:o1:a/fields"]), {
    "cid:c1:a": at("c1"),
  });
  assert.deepEqual(await places(store, "other", ["cid:c1:a", "cid:c1:a/fields"]), {
    "cid:c1:a": at("c1", ["elsewhere"]),
  });
  // Another document's rows replaced leave this one's entries.
  assert.equal(await store.replaceRows("other", 0, [], []), true);
  assert.deepEqual(Object.keys(await places(store, "doc", ["cid:c1:a", "cid:c1:a/fields"])).sort(), [
    "cid:c1:a",
    "cid:c1:a/fields",
  ]);
  assert.deepEqual(await places(store, "other", ["cid:c1:a", "cid:o1:a"]), {});
}

async function checkMany(store: DocumentStore) {
  const rows = Array.from({ length: 20_000 }, (_, index) => clip(`c${index}`, mapsOf(`c${index}`)));
  await create(store, "doc", rows);
  const ids = rows.flatMap((row) => (row.containers as ContainerEntry[]).map(([id]) => id));
  assert.equal(ids.length, 40_000);
  const containerPlaces = store.containerPlaces?.bind(store);
  assert.ok(containerPlaces !== undefined);
  await containerPlaces("doc", ids.slice(0, 1000));
  const started = performance.now();
  const found = await containerPlaces("doc", [...ids, "cid:none"]);
  const elapsed = performance.now() - started;
  assert.equal(found.size, 40_000);
  assert.deepEqual(found.get("cid:c19999:a/fields"), at("c19999", ["fields"]));
  // ~100 ms on a busy 2-core machine; the bound is loose, for a read gone wrong by far.
  assert.ok(elapsed < underLoadMs(400), `40,000 ids read in ${Math.round(elapsed)} ms`);
}

describeOnBothStores("the container index: every row write keeps it", "containers", checkWrites);
describeOnBothStores(
  "the container index: documents never see each other's",
  "containers_apart",
  checkDocumentsApart,
);
describeOnBothStores("the container index: 40,000 ids in one call", "containers_many", checkMany);
