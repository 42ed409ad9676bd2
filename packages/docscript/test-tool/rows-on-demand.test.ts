/**
 * Runs on a document above the tool's `readWholeUpTo` (ADR 0466): the first run reads only the rows its
 * script and checks look up, from the server's stored rows, never the whole document; and what a run
 * answers — previews, refusals with their issues, errors with line and column, pages, plans and
 * commits — is what the same script answers on a tool that reads the document whole.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { largeTimeline, largeTimelineRows } from "../test/large-timeline.ts";
import { type Harness, startHarness } from "./harness.ts";

const extraClips = 7_000;
let harness: Harness;
let firstClips: readonly string[] = [];
let entityCount = 0;

/**
 * A fetch that counts the rows the server answers the tool's `rows` lookups with (`rows`), and those of
 * them sent with their JSON (`sent`; a bare lookup names its rows only, ADR 0509), and the entities
 * looked up by id or for their variants (`entitiesLookedUp`).
 */
function countingFetch() {
  const counted = { requests: 0, rows: 0, sent: 0, entitiesLookedUp: [] as string[] };
  const fetchImpl: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (new URL(url).pathname.endsWith("/rows") && response.ok) {
      counted.requests += 1;
      const { lookups } = JSON.parse(String(init?.body)) as { lookups: Record<string, unknown>[] };
      for (const lookup of lookups)
        if (lookup.members === "entity")
          counted.entitiesLookedUp.push(...((lookup.ids ?? lookup.variantsOf ?? []) as string[]));
      const answer = (await response.clone().json()) as { results: { rows: { json?: unknown }[] }[] };
      for (const result of answer.results) {
        counted.rows += result.rows.length;
        counted.sent += result.rows.filter((row) => row.json !== undefined).length;
      }
    }
    return response;
  };
  return { counted, fetchImpl };
}

/** The scripts both tools run, about `clip`: reads, a refused write, an error, a plan and a refused plan. */
function comparedScripts(clip: string): string[] {
  return [
    // Pages of clips by kind, each after the last id of the one before: every clip once.
    `let after; const seen = new Set();
for (;;) {
  const page = entities.list({ entityKind: 'clip', limit: 4000, ...(after === undefined ? {} : { after }) });
  for (const clip of page) seen.add(clip.entityId);
  if (page.length < 4000) break;
  after = page[page.length - 1].entityId;
}
console.log(seen.size);
console.log(entities.list({ entityKind: 'track' }).map((track) => track.entityId).sort().join());
console.log(relations.of('${clip}').map((relation) => relation.relationKind).join());
console.log(relations.list({ relationKind: 'marker' }).length);
entities.update('${clip}', [{ op: 'set', path: ['speed'], value: 2 }]);`,
    // A refused write: its issues and the shape of the value given.
    `entities.update('${clip}', [{ op: 'set', path: ['volume'], value: 'loud' }]);`,
    // A runtime error, with its line and column.
    `const held = relations.of('${clip}');\nnull.crash;`,
    // A new clip on the video track, held with its marker and content: a whole plan.
    `const image = entities.create({ entityKind: 'image', payload: { system: 'files', key: 'on-demand.png' } });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 1, durationMs: 2, trimStartMs: 0 } });
const made = entities.create({ entityKind: 'clip', payload: {} });
relations.link({ relationKind: 'marker', endpoint0EntityId: made.entityId, endpoint1EntityId: marker.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: made.entityId, endpoint1EntityId: image.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: 'track-1', endpoint1EntityId: made.entityId, index: 2 });`,
    // A plan the whole check refuses: a clip left without its marker.
    `const [marker] = relations.of('${clip}', 'marker'); relations.unlink(marker.relationId); entities.delete(marker.endpoint1EntityId);`,
  ];
}

/** What a model reads, without what differs run to run (plan ids, made ids, versions). */
const comparable = (result: DocScriptResult) =>
  JSON.parse(
    JSON.stringify(result)
      .replace(/"plan_id":"[^"]*"/g, '"plan_id":"-"')
      .replace(/"version":"[^"]*"/g, '"version":"-"')
      .replace(/(clip|image|sequence-marker|contain|marker)-[A-Za-z0-9_-]{12}/g, "$1-made"),
  );

const sandbox = { timeoutMs: 300_000, prepareTimeoutMs: 300_000 };
/** A test of a large document's runs: minutes on a loaded machine. */
const slow = { timeout: 600_000 };

/** A tool over the document whose `rows` requests (and the rows they bring) are counted. */
function countedTool() {
  const { counted, fetchImpl } = countingFetch();
  return { counted, tool: harness.tool({ fetchImpl, requestTimeoutMs: 300_000, sandbox }) };
}

/** Ten volume writes ask one request a clip (no invariant reads a volume); made ids ask nothing. */
async function callsAskOnce(): Promise<void> {
  const { counted, tool } = countedTool();
  // Ten clips' volume, one call each: no invariant reads a volume, so each call's check reads its clip
  // (with its relations, in the same request) and nothing further; the run's end check reads the
  // neighbours of all ten in one request.
  const muted = await tool.handle({
    op: "run-edit-script",
    doc_id: "on-demand",
    script: `for (const id of ${JSON.stringify(firstClips)}) entities.update(id, [{ op: 'set', path: ['volume'], value: -60 }]);`,
  });
  assert.ok(muted.ok && muted.op === "run-edit-script", JSON.stringify(muted).slice(0, 400));
  assert.equal(muted.preview.counts.updated, 10);
  assert.ok(counted.requests <= 13, `${counted.requests} requests for ten clips`);
  // Five captions the run creates: their ids are its own, so nothing is asked of them.
  const before = counted.requests;
  const made = await tool.handle({
    op: "run-edit-script",
    doc_id: "on-demand",
    script:
      "for (let i = 0; i < 5; i++) entities.create({ entityKind: 'caption', payload: { text: 'Line ' + i } });",
  });
  assert.ok(made.ok && made.op === "run-edit-script", JSON.stringify(made).slice(0, 400));
  assert.equal(made.preview.counts.created, 5);
  assert.equal(counted.requests - before, 0, "requests for five captions");
  await tool.close();
}

/** A loop over a window's markers writing each one's clip: the clips are read ahead in one request. */
async function loopReadsAhead(): Promise<void> {
  const { counted, tool } = countedTool();
  // The markers in a window, then each one's clip: the clips are read ahead in one request while the
  // script goes on, not one request a clip.
  const muted = await tool.handle({
    op: "run-edit-script",
    doc_id: "on-demand",
    script: `const markers = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 60000, to: 70000 } });
for (const marker of markers) {
  const [of] = relations.of(marker.entityId, 'marker');
  entities.update(of.endpoint0EntityId, [{ op: 'set', path: ['volume'], value: -60 }]);
}
console.log(markers.length);`,
  });
  assert.ok(muted.ok && muted.op === "run-edit-script", JSON.stringify(muted).slice(0, 400));
  const markers = Number(muted.logs[0]?.text);
  assert.ok(markers >= 8, `${markers} markers in the window`);
  assert.equal(muted.preview.counts.updated, markers);
  // The window, its markers, their clips (read ahead), the end check's neighbours: not one a clip.
  assert.ok(counted.requests <= 6, `${counted.requests} requests for ${markers} clips`);
  await tool.close();
}

/**
 * A window read in pages of 500 (`entities.list({ range, limit: 500, after })`), each page written: the
 * server reads each page's rows once, not a 5,000-candidate chunk from every cursor.
 */
async function windowPagesReadOnce(): Promise<void> {
  const { counted, tool } = countedTool();
  const run = await tool.handle({
    op: "run-edit-script",
    doc_id: "on-demand",
    script: `let after; let seen = 0;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 0 }, limit: 500, after });
  if (page.length === 0) break;
  seen += page.length;
  entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['trimStartMs'], value: 1 }] })));
  after = page[page.length - 1].entityId;
}
console.log(seen);`,
  });
  assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
  const markers = Number(run.logs[0]?.text);
  assert.ok(markers > extraClips, `${markers} markers`);
  assert.equal(run.preview.counts.updated, markers);
  // Each marker's row once for its page (its claims are asked bare, ADR 0509), and a few more rows
  // the end check reaches: about one row a marker. Chunks of 5,000 from each cursor read ~5× that.
  assert.ok(counted.sent < markers * 1.5, `${counted.sent} rows sent for ${markers} markers`);
  // A small page after the run moved 400 of the window's first candidates out of it: read past them.
  const past = await tool.handle({
    op: "run-edit-script",
    doc_id: "on-demand",
    script: `const window = { field: 'startMs', from: 1 };
const first = entities.list({ entityKind: 'sequence-marker', range: window, limit: 405 });
entities.updateMany(first.slice(0, 400).map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: 0 }] })));
const page = entities.list({ entityKind: 'sequence-marker', range: window, limit: 5 });
console.log(JSON.stringify([page.map((m) => m.entityId), first.slice(400).map((m) => m.entityId)]));`,
  });
  assert.ok(past.ok && past.op === "run-edit-script", JSON.stringify(past).slice(0, 400));
  const [page, expected] = JSON.parse(String(past.logs[0]?.text)) as [string[], string[]];
  assert.equal(page.length, 5);
  assert.deepEqual(page, expected);
  await tool.close();
}

/** `script` run on the large document by a tool of its own, with the requests it asked counted. */
async function runCounted(script: string) {
  const { counted, tool } = countedTool();
  const run = await tool.handle({ op: "run-edit-script", doc_id: "on-demand", script });
  assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
  await tool.close();
  return { counted, run };
}

/**
 * A move of a track's last clip to its front: the move asks for the clip (the relation's target) and
 * for the track's first clips (its new place) in one request, then for what its checks reach, which
 * leaves out the clip's invariant (its view is as it was).
 */
async function moveAsksOnceForPlace(): Promise<void> {
  const reads = "const [last] = relations.of('track-1', 'contain', { last: 1 });";
  const requestsOf = async (script: string) => {
    const { counted, run } = await runCounted(script);
    return { requests: counted.requests, run };
  };
  const read = await requestsOf(reads);
  const moved = await requestsOf(`${reads}\nrelations.move(last.relationId, { index: 0 });`);
  assert.ok(moved.run.ok && moved.run.op === "run-edit-script");
  assert.equal(moved.run.preview.counts.moved, 1);
  // The clip with the track's first clips, then what its checks reach: two requests. The clip's own
  // invariant, which reads its content, is not asked again: a move among the track's other clips
  // leaves the clip's view as it was (ADR 0512; three requests before, four before ADR 0506).
  assert.equal(moved.requests - read.requests, 2, "requests of the move");
}

/**
 * A listing by kind reads its entities with every row claiming them in one request (`claims`): a run
 * that lists the tracks asks one request more than a run that reads nothing (two before).
 */
async function listingAsksOnce(): Promise<void> {
  const requestsOf = async (script: string) => {
    const { counted, run } = await runCounted(script);
    assert.ok(run.ok && run.op === "run-edit-script");
    return { requests: counted.requests, logs: run.logs };
  };
  const nothing = await requestsOf("console.log('nothing');");
  const listed = await requestsOf(
    "console.log(entities.list({ entityKind: 'track' }).map((track) => track.entityId).sort().join());",
  );
  assert.equal(listed.logs[0]?.text, "track-1,track-2,track-3");
  assert.equal(listed.requests - nothing.requests, 1, "requests of the listing");
}

/**
 * A window listed and each of its entities written (the shift's script): the listing reads the
 * entities with every row claiming them and their variants (`claims`), so the write looks none of them
 * up again (it asked for the entities and their variants in two more requests a page before).
 */
async function windowWriteLooksUpNothingAgain(): Promise<void> {
  const shifted =
    await runCounted(`const markers = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 60000, to: 70000 } });
entities.updateMany(markers.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['trimStartMs'], value: 2 }] })));
console.log(JSON.stringify(markers.map((m) => m.entityId)));`);
  assert.ok(shifted.run.ok && shifted.run.op === "run-edit-script");
  const markers = JSON.parse(String(shifted.run.logs[0]?.text)) as string[];
  assert.ok(markers.length >= 8, `${markers.length} markers in the window`);
  assert.equal(shifted.run.preview.counts.updated, markers.length);
  // The listing's entities and their variants came with it: the writes look up none of them again.
  const listed = new Set(markers);
  assert.deepEqual(
    shifted.counted.entitiesLookedUp.filter((id) => listed.has(id)),
    [],
    "listed entities looked up again",
  );
}

/**
 * A medium deleted with the clips that show it (the tasks bench's delete): the clips' relations and
 * the other ends those reach are read ahead while the call checks, the medium's identity with them
 * (the medium's delete checks it), so its delete asks nothing of its own.
 */
async function deleteReadsIdentityAhead(): Promise<void> {
  const { counted, run } = await runCounted(`const mediumId = 'large-image-7';
for (const shown of relations.of(mediumId, 'contain')) entities.delete(shown.endpoint0EntityId);
for (const other of relations.of(mediumId)) relations.unlink(other.relationId);
entities.delete(mediumId);`);
  assert.ok(run.ok && run.op === "run-edit-script");
  assert.equal(run.preview.counts.deleted, 3);
  // The document's size (a new tool asks it once); the medium's shown clips; the clip with its marker
  // and neighbours; what they reach, read ahead with the medium's identity: four requests (five when
  // the identity was asked on its own).
  assert.equal(counted.requests, 4, "requests of the delete");
}

describe("runs that read rows on demand", { timeout: 900_000 }, () => {
  before(async () => {
    harness = await startHarness();
    const built = largeTimeline(extraClips);
    firstClips = built.firstClips;
    entityCount = built.entityCount;
    for (const docId of ["on-demand", "whole"])
      await harness.storeDocument(docId, built.snapshot, largeTimelineRows(extraClips));
  });
  after(async () => {
    await harness.close();
  });

  test("the first run reads the rows its writes reach, not the document; it commits", {
    timeout: 600_000,
  }, async () => {
    const { counted, tool } = countedTool();
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: "on-demand",
      script: `for (const id of ${JSON.stringify(firstClips)}) entities.update(id, [{ op: 'set', path: ['volume'], value: -7 }]);`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 400));
    assert.equal(run.preview.counts.updated, 10);
    assert.deepEqual((run.preview.changes[0] as { fields: unknown }).fields, [
      { path: "volume", before: 0, after: -7 },
    ]);
    // Ten clips, their images, relations and track: tens of rows, of a document of 21k entities.
    assert.ok(entityCount > 20_000);
    assert.ok(counted.rows > 10 && counted.rows < 500, `rows read: ${counted.rows}`);
    const requestsAfterFirst = counted.requests;

    // A second run over the same clips at the same version reads nothing more.
    const again = await tool.handle({
      op: "run-edit-script",
      doc_id: "on-demand",
      script: `for (const id of ${JSON.stringify(firstClips)}) entities.update(id, [{ op: 'set', path: ['volume'], value: -8 }]);`,
    });
    assert.ok(again.ok && again.op === "run-edit-script");
    assert.equal(counted.requests, requestsAfterFirst);

    const committed = await tool.handle({ op: "commit-plan", doc_id: "on-demand", plan_id: again.plan_id });
    assert.ok(committed.ok && committed.op === "commit-plan" && committed.status === "committed");
    const page = await harness.client.entities("on-demand", { ids: [...firstClips] });
    assert.deepEqual(
      page.entities.map((entity) => entity.payload.volume),
      firstClips.map(() => -8),
    );
    await tool.close();
  });

  test("a call asks once for the rows it writes, and nothing for the ids it made", slow, callsAskOnce);

  test(
    "a loop over a listing's entities that writes their neighbours asks once for the neighbours",
    slow,
    loopReadsAhead,
  );

  test("a window listed in pages of 500 and written reads each page's rows once", slow, windowPagesReadOnce);

  test("a move asks for the relation's target and its new place in one request", slow, moveAsksOnceForPlace);

  test("a listing by kind reads its entities and their claims in one request", slow, listingAsksOnce);

  test(
    "a medium's delete finds its identity read ahead with its clip's neighbours",
    slow,
    deleteReadsIdentityAhead,
  );

  test(
    "a window's entities written after their listing are not looked up again",
    slow,
    windowWriteLooksUpNothingAgain,
  );

  test("reads, refusals, errors and plans answer as on a tool that reads the document whole", {
    timeout: 600_000,
  }, async () => {
    const onDemand = harness.tool({ requestTimeoutMs: 300_000, sandbox });
    const whole = harness.tool({
      requestTimeoutMs: 300_000,
      sandbox: { ...sandbox, readWholeUpTo: Number.POSITIVE_INFINITY },
    });
    const clip = firstClips[3] as string;
    const scripts = comparedScripts(clip);
    for (const script of scripts) {
      const [fromDemand, fromWhole] = [
        await onDemand.handle({ op: "run-edit-script", doc_id: "whole", script }),
        await whole.handle({ op: "run-edit-script", doc_id: "whole", script }),
      ];
      assert.deepEqual(comparable(fromDemand), comparable(fromWhole), script.slice(0, 80));
    }
    const first = await onDemand.handle({
      op: "run-edit-script",
      doc_id: "whole",
      script: scripts[0] as string,
    });
    assert.ok(first.ok && first.op === "run-edit-script");
    assert.deepEqual(
      first.logs.map((line) => line.text),
      [String(extraClips + 3), "track-1,track-2,track-3", "contain,contain,marker", String(extraClips + 3)],
    );
    // On demand, pages come in id order.
    const ordered = await onDemand.handle({
      op: "run-edit-script",
      doc_id: "whole",
      script: `const first = entities.list({ entityKind: 'clip', limit: 3 }); const next = entities.list({ entityKind: 'clip', limit: 3, after: first[2].entityId });
console.log([...first, ...next].map((clip) => clip.entityId).join());`,
    });
    assert.ok(ordered.ok && ordered.op === "run-edit-script");
    const ids = String(ordered.logs[0]?.text).split(",");
    assert.deepEqual(ids, [...ids].sort());
    assert.equal(new Set(ids).size, 6);
    await onDemand.close();
    await whole.close();
  });
});
