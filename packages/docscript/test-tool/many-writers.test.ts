/**
 * A document many writers committed to (every committed plan writes as a peer of its own): the
 * version grows an entry per peer, and an answer carries it by a short name (`versionLabel`), so every
 * answer spends the same few tokens on it whatever the document's history. Before, after 200 writers
 * each answer carried a 2,796-character version (1,842 tokens, outside the page's own budget: with
 * a few hundred more writers, past the answer's).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LoroDoc, VersionVector } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { encodeVersion, versionLabel } from "../src/document/version.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { defaultBudgets, tokensOf } from "../src/tool/budget.ts";
import { type Harness, startHarness } from "./harness.ts";

const writers = 200;
let harness: Harness;
before(async () => {
  harness = await startHarness();
  await harness.createDocument("busy", 300);
  // Each writer a fresh peer, as each committed plan is: one volume change each.
  const seed = new LoroDoc();
  await harness.client.pullInto("busy", seed);
  const clipId = [...openDocument(seed, timelineSchema).entities.list({ entityKind: "clip" })][0]!.entityId;
  for (let writer = 0; writer < writers; writer++) {
    const doc = new LoroDoc();
    await harness.client.pullInto("busy", doc);
    const from = doc.oplogVersion();
    openDocument(doc, timelineSchema).entities.update(clipId, [
      { op: "set", path: ["volume"], value: -(writer % 40) },
    ]);
    doc.commit();
    const pushed = await harness.client.push("busy", doc.export({ mode: "update", from }));
    assert.equal(pushed.status, "committed");
  }
});
after(async () => await harness.close());

test("versions are named within a few tokens, equal for equal versions, and answers keep their budgets", async () => {
  const tool = harness.tool();
  const probe = new LoroDoc();
  await harness.client.pullInto("busy", probe);
  const full = encodeVersion(probe.oplogVersion());
  assert.ok(full.length > 2000, `the version vector of ${writers} writers is long (${full.length})`);

  const page = await tool.handle({ op: "snapshot", doc_id: "busy" });
  assert.ok(page.ok && page.op === "snapshot", JSON.stringify(page).slice(0, 300));
  assert.ok(tokensOf(page) <= defaultBudgets.snapshot, `snapshot ${tokensOf(page)} tokens`);
  // What an answer spends on naming its version does not grow with the document's writers (a
  // fingerprint's 24 characters tokenize to 15-25 tokens, as random text does).
  assert.ok(
    tokensOf({ version: page.version }) <= 32,
    `the version costs ${tokensOf({ version: page.version })} tokens`,
  );
  assert.equal(page.version, versionLabel(full));
  assert.match(page.version, /^v~[A-Za-z0-9_-]{22}$/);
  // The same version, read again: the same name.
  const again = await tool.handle({ op: "snapshot", doc_id: "busy", kinds: ["track"] });
  assert.ok(again.ok && again.op === "snapshot");
  assert.equal(again.version, page.version);

  const run = await tool.handle({
    op: "run-edit-script",
    doc_id: "busy",
    script: `const [track] = entities.list({ entityKind: "track", limit: 1 }); entities.update(track.entityId, [{ op: "set", path: ["name"], value: "Renamed" }]);`,
  });
  assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
  assert.equal(run.version, page.version, "the run was made on the version the pages read");
  assert.ok(tokensOf(run) <= defaultBudgets.run, `run ${tokensOf(run)} tokens`);
  const commit = await tool.handle({ op: "commit-plan", doc_id: "busy", plan_id: run.plan_id });
  assert.ok(
    commit.ok && commit.op === "commit-plan" && commit.status === "committed",
    JSON.stringify(commit),
  );
  assert.match(commit.version, /^v~[A-Za-z0-9_-]{22}$/);
  assert.notEqual(commit.version, page.version, "a commit moves the version, and its name");
  const later = await tool.handle({ op: "snapshot", doc_id: "busy", kinds: ["track"] });
  assert.ok(later.ok && later.op === "snapshot");
  assert.equal(later.version, commit.version);
  // The full version is still what the model context and the server answer.
  const context = await tool.getModelContext({ doc_id: "busy", context_id: "c" });
  assert.equal(versionLabel(context.version), commit.version);
});

test("a short version is shown as it is, and a name does not depend on the vector's encoding order", () => {
  const one = new LoroDoc();
  one.setPeerId(5);
  one.getMap("m").set("a", 1);
  one.commit();
  const short = encodeVersion(one.oplogVersion());
  assert.equal(versionLabel(short), short);
  const many = new LoroDoc();
  for (let peer = 1; peer <= 8; peer++) {
    const writer = new LoroDoc();
    writer.setPeerId(peer * 7919);
    writer.import(many.export({ mode: "snapshot" }));
    writer.getMap("m").set(`k${peer}`, peer);
    writer.commit();
    many.import(writer.export({ mode: "update", from: many.oplogVersion() }));
  }
  const entries = [...many.oplogVersion().toJSON()];
  const reordered = new Map(entries.reverse());
  const other = Buffer.from(new VersionVector(reordered).encode()).toString("base64url");
  assert.equal(versionLabel(other), versionLabel(encodeVersion(many.oplogVersion())));
});
