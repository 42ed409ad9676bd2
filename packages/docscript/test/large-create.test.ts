/**
 * A large create holds the event loop for no step longer than a slice (ADR 0560): the roots read row
 * by row, the document checked a step at a time, the SQLite rows written in short transactions under
 * the claimed id, the document there only once its snapshot lands last. A create that fails or is
 * killed half way leaves nothing of itself; a second create of the same id is refused.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { testTimeoutMs, underLoadMs } from "@tackle/test-support";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { DocumentHost, hashToken } from "../src/server/document-host.ts";
import type { RowChange } from "../src/server/document-store.ts";
import { checkedSnapshot, createdRows } from "../src/server/snapshot-checks.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-large-create-"));
after(() => rm(directory, { recursive: true, force: true }));
const token = "token-large-create-0123456789";
const child = fileURLToPath(new URL("./large-create-child.ts", import.meta.url));

const tables = [
  "docscript_documents",
  "docscript_snapshots",
  "docscript_projection",
  "docscript_rows",
  "docscript_members",
  "docscript_numbers",
  "docscript_containers",
  "docscript_counts",
  "docscript_plans",
];

/** Rows of every table the create writes, kept under `documentId` in the file at `path`. */
function heldOf(path: string, documentId: string): Record<string, number> {
  const database = new DatabaseSync(path, { readOnly: true, timeout: 5_000 });
  try {
    return Object.fromEntries(
      tables.map((table) => {
        const row = database
          .prepare(`SELECT count(*) AS n FROM ${table} WHERE document_id = ?`)
          .get(documentId);
        return [table, Number((row as { n: number }).n)];
      }),
    );
  } finally {
    database.close();
  }
}

const nothing = Object.fromEntries(tables.map((table) => [table, 0]));

describe("a large create", { timeout: testTimeoutMs(240_000) }, () => {
  it("answers another document's reads meanwhile, holding the event loop for no step long", async (t) => {
    const store = createSqliteDocumentStore({ path: join(directory, "held.sqlite") });
    try {
      const host = new DocumentHost({ store, schema: timelineSchema });
      await host.create("small", token, sampleTimelineSnapshot());
      const snapshot = largeTimeline(10_000).snapshot;
      // The longest a 10 ms timer was late (the event loop held), and the slowest read of `small`.
      let heldMs = 0;
      let slowestReadMs = 0;
      let reads = 0;
      let last = performance.now();
      const probe = setInterval(() => {
        const now = performance.now();
        heldMs = Math.max(heldMs, now - last - 10);
        last = now;
      }, 10);
      let creating = true;
      const reader = (async () => {
        while (creating) {
          const asked = performance.now();
          await host.entityPage("small", { kinds: ["track"], limit: 10 });
          slowestReadMs = Math.max(slowestReadMs, performance.now() - asked);
          reads++;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      const started = performance.now();
      const made = await host.create("large", token, snapshot).finally(() => {
        creating = false;
      });
      const createMs = performance.now() - started;
      clearInterval(probe);
      await reader;
      assert.equal(made, true);
      const figures =
        `held ${heldMs.toFixed(0)} ms, slowest read ${slowestReadMs.toFixed(0)} ms, ` +
        `of a ${createMs.toFixed(0)} ms create`;
      t.diagnostic(figures);
      // As ADR 0554 left it, single steps held it a fifth to a quarter of the create (1.1 s of 4.6 s
      // quiet, 1.9 s of 10.9 s at load 4); now a slice, and Loro's longest calls, ~0.1 s.
      assert.ok(heldMs < createMs / 10, figures);
      assert.ok(heldMs < underLoadMs(1_000), figures);
      assert.ok(slowestReadMs < underLoadMs(1_000), figures);
      assert.ok(reads >= 10, `${reads} reads: ${figures}`);
      const page = await host.entityPage("large", { kinds: ["clip"], limit: 1 });
      assert.equal(page.entities.length, 1);
    } finally {
      await store.close();
    }
  });

  it("takes back what it wrote when it fails half way; the id can be created after", async () => {
    const path = join(directory, "failed.sqlite");
    const store = createSqliteDocumentStore({ path });
    try {
      const { doc, projection } = await checkedSnapshot(timelineSchema, largeTimeline(3_000).snapshot);
      const rows = await createdRows(doc, projection);
      // A row SQLite refuses (a member without a type), after every other: the rest are written first.
      const broken = {
        root: "entities",
        rowId: "broken",
        json: {},
        members: [{ id: "x" }],
      } as unknown as RowChange;
      const input = {
        documentId: "failing",
        tokenHash: hashToken(token),
        snapshot: doc.export({ mode: "snapshot" }),
        plans: new Map([["plan-1", "v"]]),
      };
      let seen = 0;
      let writing = true;
      const watch = (async () => {
        while (writing) {
          seen = Math.max(seen, heldOf(path, "failing").docscript_rows ?? 0);
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      await assert.rejects(
        store.createDocument({ ...input, rows: [...rows, broken] }).finally(() => {
          writing = false;
        }),
        /NOT NULL|cannot be bound/,
      );
      await watch;
      assert.ok(seen > 0, "rows were written before the failure");
      assert.deepEqual(heldOf(path, "failing"), nothing);
      assert.equal(await store.tokenHash("failing"), undefined);
      assert.equal(await store.createDocument({ ...input, rows }), true);
      assert.equal(heldOf(path, "failing").docscript_rows, rows.length);
    } finally {
      await store.close();
    }
  });

  it("leaves nothing when its process is killed half way, once the file is opened again", async () => {
    const path = join(directory, "killed.sqlite");
    await createSqliteDocumentStore({ path }).close();
    const process_ = spawn(process.execPath, ["--conditions=@tackle/source", child, path, "killed", "5000"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    process_.stdout.on("data", (chunk) => {
      output += String(chunk);
    });
    try {
      // Rows written and no snapshot yet: the create is half way.
      const deadline = Date.now() + underLoadMs(60_000);
      for (;;) {
        const held = heldOf(path, "killed");
        if ((held.docscript_rows ?? 0) > 0 && held.docscript_snapshots === 0) break;
        assert.ok(
          Date.now() < deadline && process_.exitCode === null,
          `no half-written create seen (${output})`,
        );
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      process_.kill("SIGKILL");
      await new Promise((resolve) => process_.once("exit", resolve));
      assert.equal(output, "", "killed before it was created");
      assert.equal(heldOf(path, "killed").docscript_snapshots, 0);
    } finally {
      if (process_.exitCode === null && process_.signalCode === null) process_.kill("SIGKILL");
    }
    const store = createSqliteDocumentStore({ path });
    try {
      assert.deepEqual(heldOf(path, "killed"), nothing);
      const host = new DocumentHost({ store, schema: timelineSchema });
      assert.equal(await host.authorize("killed", token), "not_found");
      assert.equal(await host.create("killed", token, sampleTimelineSnapshot()), true);
    } finally {
      await store.close();
    }
  });

  it("refuses a second create of the id while the first writes its rows, and stores the first", async () => {
    const path = join(directory, "raced.sqlite");
    const store = createSqliteDocumentStore({ path });
    try {
      const host = new DocumentHost({ store, schema: timelineSchema });
      const snapshot = largeTimeline(3_000).snapshot;
      let settled = false;
      const first = host.create("raced", token, snapshot).finally(() => {
        settled = true;
      });
      // Asked once the first has claimed the id (its rows are being written), and before it ends.
      for (;;) {
        const held = heldOf(path, "raced");
        if ((held.docscript_rows ?? 0) > 0 && held.docscript_snapshots === 0) break;
        assert.equal(settled, false, "the first create was never seen half way");
        await new Promise((resolve) => setImmediate(resolve));
      }
      const second = await host.create("raced", "another-token-0123456789", sampleTimelineSnapshot());
      assert.equal(second, false);
      assert.equal(await first, true);
      assert.equal(await host.authorize("raced", token), "ok");
      const page = await host.entityPage("raced", { kinds: ["clip"], limit: 1 });
      assert.equal(page.entities.length, 1);
    } finally {
      await store.close();
    }
  });
});
