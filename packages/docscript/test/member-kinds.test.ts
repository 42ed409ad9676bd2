/**
 * A store reads the members of one kind, or of several, in id order and in pages: the same members as
 * a filter of every member; on SQLite and PostgreSQL. On SQLite a read of one kind walks the kind
 * index (an equality), not every member of the type in id order (a list did: 0.4 s at 100k entities).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { type Filters, memberSql } from "../src/server/sqlite-member-reads.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { createMemberDocument, memberKey, readAllMembers } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const { snapshot } = largeTimeline(120, 10);
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);

async function create(store: DocumentStore) {
  await createMemberDocument(store, snapshot, projection);
}

async function checkKinds(store: DocumentStore) {
  await create(store);
  const every = await readAllMembers(store, { type: "entity" });
  const ofKinds = (kinds: readonly string[]) =>
    every.filter((member) => kinds.includes(member.kind)).map(memberKey);
  for (const kinds of [["track"], ["clip"], ["sequence-marker"], ["track", "clip"], ["no-such-kind"]]) {
    const read = await readAllMembers(store, { type: "entity", kinds });
    assert.deepEqual(read.map(memberKey), ofKinds(kinds), `kinds ${kinds.join()}`);
  }
  assert.ok(ofKinds(["clip"]).length > 7, "the clips take more than one page");
  // Relations of one kind, too.
  const relations = await readAllMembers(store, { type: "relation" });
  const contains = await readAllMembers(store, { type: "relation", kinds: ["contain"] });
  assert.deepEqual(
    contains.map(memberKey),
    relations.filter((member) => member.kind === "contain").map(memberKey),
  );
}

describeOnBothStores("readMembers by kind", "kinds", checkKinds);

it("SQLite: a read of one kind walks the kind index, of several kinds the ids", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-kinds-plan-"));
  const path = join(directory, "d.sqlite");
  const store = createSqliteDocumentStore({ path });
  try {
    await create(store);
  } finally {
    await store.close();
  }
  const database = new DatabaseSync(path);
  try {
    const none: Filters = {
      kinds: true,
      oneKind: false,
      ids: false,
      endpoint: false,
      endpoints: false,
      variantOf: false,
      variantsOf: false,
      identity: false,
      identities: false,
      bare: false,
      range: false,
      from: false,
      to: false,
    };
    const plan = (by: Filters, kinds: string) =>
      (
        database.prepare(`EXPLAIN QUERY PLAN ${memberSql(by)}`).all("doc", "entity", "", 10, kinds) as {
          detail: string;
        }[]
      )
        .map((row) => row.detail)
        .join(" | ");
    assert.match(plan({ ...none, oneKind: true }, "track"), /USING INDEX docscript_members_kind/);
    assert.doesNotMatch(plan(none, JSON.stringify(["track", "clip"])), /docscript_members_kind/);
  } finally {
    database.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
