/**
 * A window listed page by page (ADR 0510, 0513): each page brings its entities' claims and variants,
 * so checking it asks the server nothing, and once a full page is listed the next one is read while
 * the script works on this one, so listing that page asks the server nothing either, whether the
 * script writes the pages or only reads them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { largeTimelineHost } from "../../test/large-timeline.ts";
import { onDemandProjection } from "../document/on-demand-projection.ts";
import { lookupRowSource, type RowLookup } from "../document/row-source.ts";
import type { DocumentHost } from "../server/document-host.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { documentVersion } from "./document-cache.ts";

const extraClips = 2_000;
const pageSize = 500;
const window = { field: "startMs", from: 0 };
let host: DocumentHost;
let version: string;

before(async () => {
  const stored = await largeTimelineHost(extraClips);
  host = stored.host;
  version = documentVersion(stored.replica);
});
after(() => host.close());

/** A projection reading on demand whose requests are recorded with what the script was doing. */
function recordedProjection() {
  const state = { doing: "starting", inFlight: 0 };
  const asked: { doing: string; lookups: RowLookup[] }[] = [];
  const projection = onDemandProjection(
    timelineSchema,
    lookupRowSource(async (lookups) => {
      asked.push({ doing: state.doing, lookups: [...lookups] });
      state.inFlight++;
      try {
        return await host.rowLookup("doc", lookups);
      } finally {
        state.inFlight--;
      }
    }),
    version,
    100,
  );
  /** Calls whose answer waited for the server (a fill), by what the script was doing. */
  const waited: string[] = [];
  /** Fills until the call lacks nothing, as a run does between a call's tries. */
  const settle = async (call: () => string[]): Promise<string[]> => {
    for (let round = 0; round < 16; round++) {
      const answer = call();
      if (!projection.lacking) return answer;
      waited.push(state.doing);
      await projection.demand.fill();
    }
    throw new Error("the call still lacked rows");
  };
  /** The script's own work between calls: whatever is read ahead meanwhile has landed. */
  const work = async () => {
    for (let quiet = 0; quiet < 5; ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      quiet = state.inFlight === 0 ? quiet + 1 : 0;
    }
  };
  /**
   * The window listed page by page, as a script does: `onPage` with each page's ids, then the script's
   * own work (`doing`, e.g. "writing"). Answers the pages listed and the entities on them.
   */
  const eachPage = async (doing: string, onPage: (ids: string[], page: number) => Promise<void>) => {
    let after: string | undefined;
    let pages = 0;
    let listed = 0;
    for (;;) {
      state.doing = `listing ${pages}`;
      const ids = await settle(() =>
        projection.entityIdsInWindow("sequence-marker", window, after, pageSize),
      );
      if (ids.length === 0) return { pages, listed };
      listed += ids.length;
      await onPage(ids, pages);
      state.doing = `${doing} ${pages}`;
      await work();
      after = ids.at(-1);
      pages++;
    }
  };
  return { projection, state, asked, waited, settle, eachPage };
}

const isWindow = (lookup: RowLookup) => "members" in lookup && lookup.range !== undefined;

describe("a window listed in pages", () => {
  it("written page by page: each page after the first is read ahead, and no check waits", async () => {
    const { projection, state, asked, waited, settle, eachPage } = recordedProjection();
    const { pages, listed } = await eachPage("writing", async (ids, page) => {
      // A bulk write's checks: every entity of the page looked up.
      state.doing = `checking ${page}`;
      await settle(() => ids.filter((id) => projection.entity(id) === undefined));
    });
    assert.ok(listed > extraClips, `${listed} markers listed`);
    assert.ok(pages >= 4, `${pages} pages`);
    // The first page waits for the server; every later page was read while the page before was
    // written, and asked for then; no page's checks wait (its claims and variants came with it).
    assert.ok(waited.includes("listing 0"), waited.join());
    for (let page = 1; page < pages; page++)
      assert.ok(!waited.includes(`listing ${page}`), `listing page ${page} waited for the server`);
    for (let page = 0; page < pages; page++)
      assert.ok(!waited.includes(`checking ${page}`), `checking page ${page} waited for the server`);
    const windows = asked.filter((request) => request.lookups.some(isWindow));
    assert.equal(windows.length, pages + 1, "each page read once, and the empty one after");
    assert.deepEqual(projection.demand.readAheadErrors, [], "no read ahead was refused");
  });

  it("read only: each page after the first is read ahead too, each once", async () => {
    const { projection, asked, waited, eachPage } = recordedProjection();
    const { pages } = await eachPage("reading", async () => {});
    assert.ok(pages >= 4, `${pages} pages`);
    assert.ok(waited.includes("listing 0"), waited.join());
    for (let page = 1; page < pages; page++)
      assert.ok(!waited.includes(`listing ${page}`), `listing page ${page} waited for the server`);
    const windows = asked.filter((request) => request.lookups.some(isWindow));
    assert.equal(windows.length, pages + 1, "each page read once, and the empty one after");
    assert.deepEqual(projection.demand.readAheadErrors, [], "no read ahead was refused");
  });
});
