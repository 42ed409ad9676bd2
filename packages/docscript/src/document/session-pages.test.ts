/**
 * Entities and relations read past the read bound in pages: `entities.list({ entityKind, limit, after })`
 * and `relations.list({ relationKind, entityId, limit, after })`.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { Entity, Relation } from "../schema/types.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import type { DocumentSession } from "./document-session.ts";
import { openDocument } from "./document-session.ts";
import { projectDocument } from "./interpret.ts";
import type { EntityFilter, RelationFilter } from "./session-types.ts";

const bound = 20_000;
const ids = (relations: readonly Relation[]) => relations.map((relation) => relation.relationId);

/** Every page of `filter`, `limit` at a time, each read as the tool reads (with the bound). */
function walk(
  session: DocumentSession,
  filter: RelationFilter,
  limit: number,
  each: (page: Relation[]) => void = () => {},
): { ids: string[]; pages: number } {
  const seen: string[] = [];
  let pages = 0;
  let after: string | undefined;
  for (;;) {
    const page = session.relations.list({
      ...filter,
      limit,
      ...(after === undefined ? {} : { after }),
      atMost: bound,
    });
    pages++;
    seen.push(...ids(page));
    each(page);
    if (page.length < limit) return { ids: seen, pages };
    after = page.at(-1)?.relationId;
  }
}

function refusal(code: string, message: RegExp) {
  return (error: unknown) => {
    assert.ok(DocScriptError.isInstance(error), String(error));
    assert.equal(error.code, code);
    assert.match(error.message, message);
    return true;
  };
}

// 7,000 clips on track-1 (an image, a clip, its marker), a contain, a content and a marker relation each,
// beside the sample's.
const { snapshot } = largeTimeline(7000);

describe("relations in pages past the read bound", () => {
  let open: () => DocumentSession;
  let all: Relation[];
  before(() => {
    const doc = LoroDoc.fromSnapshot(snapshot);
    const projection = projectDocument(doc, timelineSchema);
    open = () => openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema, { projection });
    all = open().relations.list();
    // The pages must put relations in order: the document does not hold them in that order.
    assert.notDeepEqual([...projection.relationIds()], ids(all));
  });

  it("refuses a whole read above the bound and says how to page", () => {
    assert.ok(all.length > bound, `${all.length} relations`);
    const session = open();
    assert.throws(
      () => session.relations.list({ atMost: bound }),
      refusal(
        "read_limit",
        /^relations\.list\(\) matches more than 20000; one read answers at most 20000: read it in pages \(relations\.list\(\{ relationKind, limit: 20000, after: <the relationId of the last relation of the previous page> \}\)\)/,
      ),
    );
    assert.throws(
      () => session.relations.list({ entityId: "track-1", atMost: 1000 }),
      refusal(
        "read_limit",
        /^relations\.list\(\{"entityId":"track-1"\}\) matches more than 1000; .*relations\.list\(\{ entityId, relationKind, limit: 1000, after: <the relationId of the last relation of the previous page> \}\); relations\.of reads no pages/,
      ),
    );
    // After a cursor, only what is left counts against the bound.
    const rest = session.relations.list({
      after: all[all.length - bound]?.relationId as string,
      atMost: bound,
    });
    assert.deepEqual(ids(rest), ids(all.slice(-bound + 1)));
  });

  it("walks every relation exactly once, in order, whatever the page size", () => {
    const session = open();
    for (const limit of [bound, 3001]) {
      const walked = walk(session, {}, limit);
      assert.equal(walked.pages, Math.floor(all.length / limit) + 1);
      assert.equal(new Set(walked.ids).size, all.length);
      assert.deepEqual(walked.ids, ids(all));
    }
    const contain = session.relations.list({ relationKind: "contain" });
    assert.ok(contain.length > 7000);
    assert.deepEqual(walk(session, { relationKind: "contain" }, 2500).ids, ids(contain));
    const ofTrack = session.relations.of("track-1");
    assert.ok(ofTrack.length > 7000);
    assert.deepEqual(walk(session, { entityId: "track-1" }, 999).ids, ids(ofTrack));
    assert.deepEqual(
      walk(session, { entityId: "large-clip-3", relationKind: "contain" }, 1).ids,
      ids(session.relations.of("large-clip-3", "contain")),
    );
  });

  it("reads on from where a page ended after the script unlinks or moves that page's last relation", () => {
    const session = open();
    const expected = ids(session.relations.of("track-1", "contain"));
    const unlinked: string[] = [];
    const moved: string[] = [];
    const walked = walk(session, { entityId: "track-1", relationKind: "contain" }, 1000, (page) => {
      const last = page.at(-1);
      if (last === undefined) return;
      // Alternately: the page's last relation leaves, or moves to the front of the track.
      if (unlinked.length === moved.length) {
        session.relations.unlink(last.relationId);
        unlinked.push(last.relationId);
      } else {
        session.relations.move(last.relationId, { index: 0 });
        moved.push(last.relationId);
      }
    });
    assert.ok(moved.length >= 3);
    assert.deepEqual(walked.ids, expected);
    const now = ids(session.relations.of("track-1", "contain"));
    assert.equal(now.length, expected.length - unlinked.length);
    assert.deepEqual(now.slice(0, moved.length), moved.toReversed());

    const whole = open();
    const everything = walk(whole, {}, 4000, (page) => {
      const last = page.at(-1);
      if (last !== undefined && last.relationKind === "contain") whole.relations.unlink(last.relationId);
    });
    assert.deepEqual(everything.ids, ids(all));
  });

  it("refuses a limit or an after it cannot page by, with a typed error", () => {
    const session = open();
    for (const limit of [0, -1, 1.5, Number.NaN])
      assert.throws(
        () => session.relations.list({ limit }),
        refusal("invalid_operation", /relations\.list: limit is a whole number of at least 1/),
      );
    const contain = session.relations.of("track-1", "contain")[4] as Relation;
    assert.equal(contain.relationId, "large-contain-3");
    assert.equal(session.relations.list({ after: contain.relationId, limit: 1 }).length, 1);
    for (const [filter, message] of [
      [{ after: "no-such-relation" }, /after names no relation "no-such-relation"; pass the relationId/],
      [
        { relationKind: "marker", after: contain.relationId },
        /after names no marker relation "large-contain-3"/,
      ],
      [
        { entityId: "track-2", after: contain.relationId },
        /after names no relation "large-contain-3" touching "track-2"/,
      ],
      [{ relationKind: "nope", after: contain.relationId }, /after names no nope relation/],
    ] as const)
      assert.throws(
        () => session.relations.list({ ...filter, limit: 10 }),
        refusal("invalid_operation", message),
      );
  });
});

describe("entities in pages past the read bound", () => {
  const open = () => openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
  const entityIds = (entities: readonly Entity[]) => entities.map((entity) => entity.entityId);
  const byId = (entities: readonly Entity[]) => entityIds(entities).sort();
  const byIdOrder = (entities: readonly Entity[]) =>
    [...entities].sort((left, right) => (left.entityId < right.entityId ? -1 : 1));

  /** Every page of `filter`, `limit` at a time, as the tool reads. */
  function walkEntities(
    session: DocumentSession,
    filter: EntityFilter,
    limit: number,
    each: (page: Entity[]) => void = () => {},
  ): string[] {
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = session.entities.list({
        ...filter,
        limit,
        ...(after === undefined ? {} : { after }),
        atMost: bound,
      });
      seen.push(...entityIds(page));
      each(page);
      if (page.length < limit) return seen;
      after = page.at(-1)?.entityId;
    }
  }

  it("walks every entity exactly once, in entityId order, and a whole read above the bound says how to page", () => {
    const session = open();
    const all = session.entities.list();
    assert.ok(all.length > bound, `${all.length} entities`);
    assert.notDeepEqual(entityIds(all), byId(all), "the document's own order is not the pages' order");
    assert.throws(
      () => session.entities.list({ atMost: bound }),
      refusal(
        "read_limit",
        /^entities\.list\(\) matches more than 20000; .*read it in pages \(entities\.list\(\{ entityKind, limit: 20000, after: <the last entityId of the previous page> \}\)\)/,
      ),
    );
    for (const limit of [bound, 2999]) assert.deepEqual(walkEntities(session, {}, limit), byId(all));
    const clips = session.entities.list({ entityKind: "clip" });
    assert.deepEqual(walkEntities(session, { entityKind: "clip" }, 1000), byId(clips));
    const firstTwo = session.entities.list({ entityKind: "clip", limit: 2 });
    assert.deepEqual(firstTwo, byIdOrder(clips).slice(0, 2), "a page's entities read as the whole read's");
  });

  it("visits every entity once while the script updates and deletes what it read", () => {
    const session = open();
    const clips = byId(session.entities.list({ entityKind: "clip" }));
    const deleted: string[] = [];
    const updated: string[] = [];
    const walked = walkEntities(session, { entityKind: "clip" }, 1000, (page) => {
      // A write moves the entity it touched in the document's order: the page's first and last clips
      // get a new volume, and every other page's last clip (the next page's after) is then deleted.
      const [first, last] = [page[0], page.at(-1)];
      if (first === undefined || last === undefined) return;
      for (const clip of new Set([first, last])) {
        session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: -3 }]);
        updated.push(clip.entityId);
      }
      if (updated.length % 4 === 0) {
        session.entities.delete(last.entityId);
        deleted.push(last.entityId);
      }
    });
    assert.deepEqual(walked, clips);
    const now = session.entities.list({ entityKind: "clip" });
    assert.ok(deleted.length >= 3);
    assert.equal(now.length, clips.length - deleted.length);
    assert.equal(now.filter((clip) => clip.payload.volume === -3).length, updated.length - deleted.length);
  });

  it("refuses a limit or an after it cannot page by, with a typed error", () => {
    const session = open();
    for (const limit of [0, -2, 2.5])
      assert.throws(
        () => session.entities.list({ limit }),
        refusal("invalid_operation", /entities\.list: limit is a whole number of at least 1/),
      );
    assert.throws(
      () => session.entities.list({ limit: 5, after: "no-such-entity" }),
      refusal(
        "invalid_operation",
        /after names no entity "no-such-entity"; pass the entityId of the last entity/,
      ),
    );
    assert.throws(
      () => session.entities.list({ entityKind: "image", limit: 5, after: "large-clip-3" }),
      refusal("invalid_operation", /after names no image "large-clip-3"/),
    );
  });
});
