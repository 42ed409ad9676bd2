/**
 * The plan index (ADR 0486, migration 9): the plan ids a document's pushes applied are recorded with
 * each append, on SQLite and PostgreSQL, so a re-derived plan is answered as a duplicate and a plan's
 * state is read without the document's history; a document stored before the index has its history
 * read once and recorded.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { migrateSqlite } from "@tackle/storage";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { sqliteMigrations } from "./migrations.ts";
import { createPostgresDocumentStore } from "./postgres/postgres-document-store.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const directory = mkdtempSync(join(tmpdir(), "docscript-plan-index-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

/** A plan made from `base` by another peer: a caption renamed, committed as a plan does. */
function plan(base: Uint8Array, planId: string, peer: bigint, text: string): Uint8Array {
  const doc = new LoroDoc();
  doc.import(base);
  doc.setPeerId(peer);
  const from = doc.oplogVersion();
  const session = openDocument(doc, timelineSchema);
  const caption = session.entities.list({ entityKind: "caption" })[0];
  assert.ok(caption !== undefined, "the sample timeline has a caption");
  session.entities.update(caption.entityId, [{ op: "set", path: ["text"], value: text }]);
  doc.commit({ message: JSON.stringify({ planId }) });
  return doc.export({ mode: "update", from });
}

async function pushedPlans(open: () => Promise<DocumentStore>) {
  const store = await open();
  const host = new DocumentHost({ store, schema: timelineSchema });
  try {
    assert.equal(await host.create("doc", "token-0123456789abcdef", sampleTimelineSnapshot()), true);
    assert.deepEqual(await store.appliedPlans("doc", ["plan-1"]), new Map(), "indexed from creation");
    const base = (await host.snapshot("doc")).bytes;
    const pushed = await host.push("doc", plan(base, "plan-1", 31n, "first"));
    assert.equal(pushed.status, "committed");
    assert.ok(pushed.status === "committed");
    assert.deepEqual(
      await store.appliedPlans("doc", ["plan-1", "plan-2"]),
      new Map([["plan-1", pushed.version]]),
    );
    // The same plan re-derived (other bytes, another peer): a duplicate, nothing stored.
    const again = await host.push("doc", plan(base, "plan-1", 32n, "second"));
    assert.deepEqual(again, { status: "committed", version: pushed.version, duplicate: true });
    assert.equal((await store.updatesAfter("doc", 0)).length, 1);
  } finally {
    await host.close();
    await store.close();
  }
  // Another server over the same store answers from the index, without the history.
  const reopened = await open();
  const later = new DocumentHost({ store: reopened, schema: timelineSchema });
  try {
    const state = await later.planState("doc", "plan-1");
    assert.equal(state.state, "applied");
    assert.deepEqual(await later.planState("doc", "plan-9"), {
      state: "unknown",
      version: (await later.snapshot("doc")).version,
    });
  } finally {
    await later.close();
    await reopened.close();
  }
}

describe("the plan index", () => {
  it("records a push's plans on SQLite; a re-derived plan is a duplicate", async () => {
    const path = join(directory, "pushed.db");
    await pushedPlans(async () => createSqliteDocumentStore({ path }));
  });

  it("records a push's plans on PostgreSQL; a re-derived plan is a duplicate", async () => {
    const database = await createTestDatabase("tackle_docscript_plans");
    databases.push(database);
    await pushedPlans(() => createPostgresDocumentStore({ connectionString: database.url }));
  });

  it("indexes a document stored before migration 9 from its history once", async () => {
    // A file at migration 8 holding a document whose history applied plan-old.
    const path = join(directory, "before.db");
    const staging = join(directory, "staging.db");
    const first = createSqliteDocumentStore({ path: staging });
    const host = new DocumentHost({ store: first, schema: timelineSchema });
    await host.create("doc", "token-0123456789abcdef", sampleTimelineSnapshot());
    const pushed = await host.push("doc", plan((await host.snapshot("doc")).bytes, "plan-old", 41n, "old"));
    assert.equal(pushed.status, "committed");
    const { bytes: snapshot } = await host.snapshot("doc");
    await host.close();
    await first.close();
    const database = new DatabaseSync(path);
    migrateSqlite(database, { store: "docscript", migrations: sqliteMigrations.slice(0, 8) });
    database
      .prepare(
        "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq, created_at) VALUES ('doc', ?, ?, 0, '2026-01-01')",
      )
      .run("0".repeat(64), snapshot);
    database.close();
    const store = createSqliteDocumentStore({ path });
    const later = new DocumentHost({ store, schema: timelineSchema });
    try {
      assert.equal(await store.appliedPlans("doc", ["plan-old"]), undefined, "not indexed yet");
      assert.equal((await later.planState("doc", "plan-old")).state, "applied");
      const indexed = await store.appliedPlans("doc", ["plan-old"]);
      assert.deepEqual([...(indexed?.keys() ?? [])], ["plan-old"], "recorded from the history");
      // A push after it lands in the index with its version.
      const next = await later.push("doc", plan(snapshot, "plan-new", 42n, "new"));
      assert.ok(next.status === "committed");
      assert.equal((await store.appliedPlans("doc", ["plan-new"]))?.get("plan-new"), next.version);
    } finally {
      await later.close();
      await store.close();
    }
  });
});
