import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { createToolSet, isNotFound, silentLogger, ToolError } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient } from "../client/create-document-client.ts";
import { openDocument } from "../document/document-session.ts";
import type { DocumentChange } from "../server/change-log.ts";
import { serveDocuments } from "../server/serve-documents.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import docscriptBundle, { sampleDocumentId } from "./bundle.ts";
import { sampleTimelineSnapshot } from "./sample-timeline.ts";

test("the docscript module serves a sample timeline the console can snapshot, script and commit", async () => {
  const bundle = await docscriptBundle({
    module: "docscript",
    node: "test-node",
    env: {},
    logger: silentLogger,
  });
  try {
    const tools = createToolSet(bundle.tools);
    assert.deepEqual(tools.tools.map((tool) => tool.name).sort(), [
      "changes",
      "context",
      "edit",
      "mcp.complete",
      "mcp.prompt",
      "mcp.prompts",
      "mcp.read",
      "mcp.resources",
      "mcp.versions",
    ]);
    const context = await tools.call("context", {});
    assert.ok(context.ok);
    assert.match((context.output as { prompt: string }).prompt, /declare const entities/);
    const script = `const bgm = entities.list().find((e) => e.entityKind === 'track' && e.payload.role === 'bgm');
const [held] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);
entities.update(held.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: -6 }]);`;
    const run = await tools.call("edit", { op: "run-edit-script", doc_id: sampleDocumentId, script });
    assert.ok(run.ok, JSON.stringify(run));
    const planId = (run.output as { plan_id: string }).plan_id;
    const commit = await tools.call("edit", { op: "commit-plan", doc_id: sampleDocumentId, plan_id: planId });
    assert.ok(commit.ok);
    assert.equal((commit.output as { status: string }).status, "committed");
    const snapshot = await tools.call("edit", { op: "snapshot", doc_id: sampleDocumentId });
    assert.ok(snapshot.ok);
    const volumes = (
      snapshot.output as unknown as { entities: { entityKind: string; payload: { volume?: number } }[] }
    ).entities
      .filter((entity) => entity.entityKind === "clip")
      .map((entity) => entity.payload.volume);
    assert.ok(volumes.includes(-6));
    // The commit is the newest entry of the document's change log, with its plan id.
    const log = await tools.call("changes", {});
    assert.ok(log.ok, JSON.stringify(log));
    const [newest] = (log.output as { changes: readonly DocumentChange[] }).changes;
    assert.deepEqual(newest?.planIds, [planId]);
    assert.equal(newest?.actor, "docscript@test-node");
    assert.equal(newest?.credential, "host");
    assert.deepEqual(newest?.entities, { created: 0, changed: 1, deleted: 0 });
    const changed = await tools.call("context", { context_id: "console" });
    assert.ok(changed.ok);
    assert.equal((changed.output as { changed: boolean | null }).changed, true);
    // A failed call is a failed call (so MCP marks it isError), carrying the tool's code and the logs.
    const failed = await tools.call("edit", {
      op: "run-edit-script",
      doc_id: sampleDocumentId,
      script: "console.log('before'); entities.update('no-such-entity', []);",
    });
    assert.equal(failed.ok, false);
    assert.ok(!failed.ok);
    assert.equal(failed.error.code, "runtime");
    assert.deepEqual((failed.error.data as { op: string; logs: unknown[] }).op, "run-edit-script");
    assert.deepEqual((failed.error.data as { logs: unknown[] }).logs, [{ level: "log", text: "before" }]);
    const missing = await tools.call("edit", {
      op: "commit-plan",
      doc_id: sampleDocumentId,
      plan_id: "plan_never",
    });
    assert.ok(!missing.ok);
    assert.equal(missing.error.code, "not_found");
    assert.ok(isNotFound(ToolError.fromPayload(missing.error), "plan"), JSON.stringify(missing.error));
    assert.equal((missing.error.data as { id?: unknown }).id, "plan_never");
  } finally {
    await bundle.close();
  }
});

test("DOCSCRIPT_PORT and DOCSCRIPT_TOKEN let another client edit the sample document; the change log shows it", async () => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const token = "another-client-token-0123456789";
  const bundle = await docscriptBundle({
    module: "docscript",
    node: "test-node",
    env: { DOCSCRIPT_PORT: String(port), DOCSCRIPT_TOKEN: token },
    logger: silentLogger,
  });
  try {
    const client = createDocumentClient({ origin: `http://127.0.0.1:${port}`, token, userId: "script-7" });
    const doc = new LoroDoc();
    doc.setPeerId(77);
    await client.pullInto(sampleDocumentId, doc);
    const before = doc.oplogVersion();
    openDocument(doc, timelineSchema).entities.create({ entityKind: "track", payload: { role: "bgm" } });
    doc.commit();
    assert.equal(
      (await client.push(sampleDocumentId, doc.export({ mode: "update", from: before }))).status,
      "committed",
    );
    const log = await createToolSet(bundle.tools).call("changes", { limit: 1 });
    assert.ok(log.ok, JSON.stringify(log));
    const output = log.output as { changes: readonly DocumentChange[]; next_cursor?: string };
    assert.equal(output.changes.length, 1);
    assert.equal(output.next_cursor, undefined, "the sample's creation is no push: one entry in all");
    assert.deepEqual(
      [
        output.changes[0]?.actor,
        output.changes[0]?.credential,
        output.changes[0]?.peers,
        output.changes[0]?.entities,
      ],
      ["script-7", "document", ["77"], { created: 1, changed: 0, deleted: 0 }],
    );
  } finally {
    await bundle.close();
  }
  await assert.rejects(
    docscriptBundle({
      module: "docscript",
      node: "n",
      env: { DOCSCRIPT_TOKEN: "short" },
      logger: silentLogger,
    }),
    /at least 16 characters/,
  );
});

test("the module's host credential reaches only its own document, even in a database other servers share", async () => {
  const directory = mkdtempSync(join(tmpdir(), "docscript-module-shared-"));
  const path = join(directory, "documents.sqlite");
  try {
    // Another team's document server wrote its document into the same database first.
    const adminToken = "other-admin-token-0123456789";
    const other = await serveDocuments({
      store: createSqliteDocumentStore({ path }),
      schema: timelineSchema,
      adminToken,
    });
    const theirToken = "their-document-token-0123456789";
    await createDocumentClient({ origin: other.url, token: theirToken }).createDocument("their-timeline", {
      adminToken,
      token: theirToken,
      snapshot: sampleTimelineSnapshot(),
    });
    await other.close();
    const bundle = await docscriptBundle({
      module: "docscript",
      node: "",
      env: { DOCSCRIPT_DATABASE: path },
      logger: silentLogger,
    });
    try {
      const tools = createToolSet(bundle.tools);
      const attempts: ["changes" | "context" | "edit", Record<string, unknown>][] = [
        ["changes", { doc_id: "their-timeline" }],
        ["context", { doc_id: "their-timeline", context_id: "x" }],
        ["edit", { op: "snapshot", doc_id: "their-timeline" }],
        [
          "edit",
          {
            op: "run-edit-script",
            doc_id: "their-timeline",
            script: "for (const e of entities.list()) entities.delete(e.entityId);",
          },
        ],
      ];
      for (const [name, args] of attempts) {
        const refused = await tools.call(name, args);
        assert.ok(!refused.ok, `${name} ${JSON.stringify(args)} reached their document`);
        assert.equal(refused.error.code, "not_found");
        assert.ok(isNotFound(ToolError.fromPayload(refused.error), "document"), JSON.stringify(refused));
        assert.doesNotMatch(JSON.stringify(refused), /Intro|clip|track/i, "nothing of their document");
      }
      // Its own document it serves.
      assert.ok((await tools.call("changes", {})).ok);
    } finally {
      await bundle.close();
    }
    // Their document is as they left it: nothing was pushed to it.
    const check = await serveDocuments({
      store: createSqliteDocumentStore({ path }),
      schema: timelineSchema,
    });
    try {
      const changes = await createDocumentClient({ origin: check.url, token: theirToken }).changes(
        "their-timeline",
      );
      assert.deepEqual(changes.changes, []);
    } finally {
      await check.close();
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});
