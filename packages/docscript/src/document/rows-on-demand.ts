/**
 * Rows read on demand (ADR 0466, 0485): what a projection that holds only the rows its reads and checks
 * looked up shares with its overlays, and how it reads what they lacked from a row source — the tool's
 * from the document server (`POST /documents/:id/rows`), the server's own from its store. A call runs
 * against what is held and records each lookup not answered whole; the caller fills those (`fill`)
 * and runs the call again, until it lacks nothing. A write whose checks lacked rows does not land
 * (`RowsNeeded`), so it never lands on a wrong answer.
 *
 * Listings read pages in id order: `entities.list` by kind after a cursor, `relations.list` by kind,
 * each bounded by the read limit; only a read of every row (a whole-document check) reads the whole
 * document, and only up to `wholeUpTo` entities.
 */
import type { VersionVector } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { NumberRange, RowRoot } from "../server/document-store.ts";
import {
  entityPageKey,
  KnownLookups,
  keyOf,
  orderedPageKey,
  relationPageKey,
  touchingPageKey,
  windowPageKey,
} from "./demand-keys.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import {
  idsPerLookup,
  manyAtOnce,
  membersPerPage,
  type Pending,
  speculativeLimit,
  speculativeLookups,
} from "./lookup-batches.ts";
import type { OnDemandProjection } from "./on-demand-projection.ts";
import { maxListedRelations, pageLookups } from "./page-lookups.ts";
import type { Lookup } from "./projection.ts";
import { ReadAheadDropped, ReadsAhead } from "./read-ahead.ts";
import type { PageCounts, RowLookup, RowSource, RowSourceAnswer } from "./row-source.ts";
import { decodeVersion } from "./version.ts";

/** Lookups per request. */
const lookupsPerRequest = 64;
/** The most of a holder's ordered relations read from one end (`orderedRelations`); past it, all are read. */
export const maxOrderedPage = 1000;
/** Entities looked up in one fill up to which their relations and variants are read along. */
const speculativeEntities = 64;
/** Levels of what checks ask next read within one fill, after what was asked. */
const maxFollowUps = 2;
/**
 * Lookups a fill must have answered before it reads what checks ask next: asking a small call again
 * costs less than a round trip, and a call whose checks never ask (a field no invariant reads) would
 * pay two for nothing (a clip's volume set: three requests instead of one, ~5 ms each at 100k).
 */
const followUpsAbove = 64;
/** Made ids remembered (`RowsOnDemand.made`). */
const maxFresh = 100_000;
/** Ids a fill's follow-ups may look up: past this, the call asks again instead. */
export const maxFollowUpIds = 50_000;
/** Rounds of fill-and-ask-again one call may take before the host gives up on it. */
export const maxFillRounds = 64;

type Wanted =
  | { readonly lookup: Exclude<Lookup, "whole">; readonly id: string; readonly kind?: string | undefined }
  | { readonly lookup: "whole" }
  | {
      readonly lookup: "entityPage";
      readonly kind?: string | undefined;
      readonly after?: string;
      readonly count: number;
    }
  | { readonly lookup: "relationPage"; readonly kind?: string | undefined }
  | {
      readonly lookup: "windowPage";
      readonly kind: string;
      readonly window: NumberRange;
      readonly after?: string;
      readonly count: number;
    }
  | { readonly lookup: "touchingPage"; readonly id: string; readonly count: number }
  | {
      readonly lookup: "orderedPage";
      readonly kind: string;
      readonly holder: string;
      readonly from: "first" | "last";
      readonly count: number;
    };

/** A lookup a projection records as lacking (`OnDemandProjection.need`, its listings and windows). */
export type { Wanted };

/** A listing read: every stored item of it up to `end` (all, when `exhausted`) is held. */
export interface ReadPage {
  readonly end: string | undefined;
  readonly exhausted: boolean;
  /** A relation listing not read: the kind has this many relations, more than are listed on demand. */
  readonly tooMany?: number;
}

/** A document version as one canonical string (peers in order), as `documentVersion` writes it. */
export function vectorKey(vector: VersionVector): string {
  return JSON.stringify(
    [...vector.toJSON()]
      .filter(([, counter]) => counter > 0)
      .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)),
  );
}

/** How a projection reads on demand. */
export interface DemandOptions {
  /**
   * Whether an entity looked up brings a short page of its relations and variants in the same request
   * (a run's writes check them next); the server's push checks ask for exactly what they reach.
   */
  readonly speculative?: boolean;
}

/**
 * What a projection reading rows on demand shares with its overlays (a kept base and its runs'): the
 * source to ask, the version they stand for, the lookups answered whole and those lacking, the
 * listings read, and the kinds' counts.
 */
export class RowsOnDemand {
  readonly known = new KnownLookups();
  /**
   * Ids this tool made for rows a run creates (72 random bits): no row, member or relation of the
   * document has them, nor their slots' relations (`holder#slot`), at any version, so no lookup of them
   * is asked. Once a plan with them commits, the rows are held from the catch-up like any it wrote.
   * Forgotten past `maxFresh` (a kept base lives across many runs): they are then looked up, as before.
   */
  private readonly fresh = new Set<string>();
  readonly missing = new Map<string, Wanted>();
  readonly pages = new Map<string, ReadPage>();
  /** The most relations a page found touching an entity without reaching its end: at least that many. */
  readonly touching = new Map<string, number>();
  readonly holders = new Set<OnDemandProjection>();
  counts: PageCounts | undefined;
  whole = false;
  /** Rows the server answered (for measurements and tests). */
  rowsRead = 0;
  /** Requests made. */
  requests = 0;
  /**
   * Why reads ahead failed, other than the document moving (the last few; for tests and measurements):
   * nothing is lost, a call asks again, but a refused read ahead is work the run no longer saves.
   */
  readonly readAheadErrors: string[] = [];
  /** Set once the server answered at another version: the run read a document that moved under it. */
  movedTo: string | undefined;

  /** Where the rows come from. */
  readonly source: RowSource;
  /**
   * The version the rows stand for, as `documentVersion` writes it; an answer at another is refused.
   * Undefined for a source that answers one version only (the server's store: its caller checks the
   * rows' seq after each fill).
   */
  readonly version: string | undefined;
  /** The most entities a whole read reads; past it a read of every row is refused. */
  readonly wholeUpTo: number;
  readonly speculative: boolean;
  /** What fills read ahead (ADR 0506, 0510). */
  private readonly aheads = new ReadsAhead(this);

  /** Whether fills read ahead: set while a script runs, cleared once it has ended. */
  get readsAhead(): boolean {
    return this.aheads.readsAhead;
  }

  set readsAhead(on: boolean) {
    this.aheads.readsAhead = on;
  }

  /** A listing found its page held (`key`): a page read ahead reads the next one ahead in turn. */
  listed(key: string): void {
    this.aheads.listed(key);
  }

  constructor(
    source: RowSource,
    version: string | undefined,
    wholeUpTo: number,
    options: DemandOptions = {},
  ) {
    this.source = source;
    this.version = version;
    this.wholeUpTo = wholeUpTo;
    this.speculative = options.speculative ?? true;
  }

  get lacking(): boolean {
    return this.missing.size > 0;
  }

  /** Records an id this tool made for a row a run creates. */
  made(id: string): void {
    if (this.fresh.size >= maxFresh) this.fresh.clear();
    this.fresh.add(id);
  }

  /** Whether `id` is one this tool made (`made`), or a slot relation's id of one. */
  isFresh(id: string): boolean {
    if (this.fresh.size === 0) return false;
    if (this.fresh.has(id)) return true;
    const slot = id.indexOf("#");
    return slot > 0 && this.fresh.has(id.slice(0, slot));
  }

  /**
   * Reads from the source what the lookups since the last fill lacked, into every holder; then (a run's
   * reads, `speculative`), in the same fill, what a write's checks ask next of what was read
   * (`followUps`: the claims and ends of the relations found, the ends' variants, identities), so a
   * write over thousands of rows is asked again once, not once per level of its checks.
   */
  async fill(): Promise<void> {
    // A read ahead that is bringing what the call lacks is waited for; one that is not is left to
    // run beside this fill (waiting for it would add a round trip to a call it does not serve).
    await this.aheads.servingFill(this.missing);
    const wanted = [...this.missing.entries()].filter(
      ([key]) => !this.known.has(key) && !this.pages.has(key),
    );
    this.missing.clear();
    await this.fillLevels(wanted);
    this.aheads.afterFilled(wanted);
  }

  /** A fill's lookups, then (`speculative`) what checks ask next of what was read, level by level. */
  async fillLevels(
    first: readonly [string, Wanted][],
    ask?: (lookups: readonly RowLookup[]) => Promise<RowSourceAnswer>,
  ): Promise<void> {
    let wanted = first;
    for (let depth = 0; wanted.length > 0; depth++) {
      if (wanted.some(([, entry]) => entry.lookup === "whole")) {
        await this.fillWhole();
        return;
      }
      await this.fillOnce(wanted, ask);
      const holder = this.holders.values().next().value;
      if (!this.speculative || holder === undefined || depth >= maxFollowUps) return;
      if (wanted.length <= followUpsAbove) {
        if (ask === undefined) this.aheads.afterFill(holder, wanted);
        return;
      }
      wanted = [...holder.followUps(wanted.map(([, entry]) => entry)).entries()];
    }
  }

  /** One level of a fill: the lookups wanted, in requests of at most 64. */
  async fillOnce(
    wanted: readonly [string, Wanted][],
    ask: (lookups: readonly RowLookup[]) => Promise<RowSourceAnswer> = (lookups) => this.ask(lookups),
    extra: readonly Pending[] = [],
  ): Promise<void> {
    const pending: Pending[] = this.lookupsByIds(wanted);
    const paged = (
      query: RowLookup & { members: string },
      onPage: (last: string | undefined, exhausted: boolean) => void,
      most = Number.POSITIVE_INFINITY,
      startAfter?: string,
    ) => {
      let read = 0;
      const next = (after: string | undefined): Pending => {
        const limit = Math.min(membersPerPage, most - read);
        return {
          lookup: { ...query, limit, ...(after === undefined ? {} : { after }) },
          done: (result) => {
            read += result.found;
            const exhausted = result.found < limit;
            if (exhausted || read >= most) onPage(result.last ?? after, exhausted);
            // Members past a page's last id that claim it too are read with the next page's lookup.
            else pending.push(next(result.last));
          },
        };
      };
      return next(startAfter);
    };
    // An entity looked up is usually checked next with its relations and variants: asked in the same
    // request. Only for a few entities: a call that looked up thousands asks for what its checks need
    // next in batches, one more request.
    const entityIds = idsOf(wanted, "entity");
    if (this.speculative && entityIds.length <= speculativeEntities)
      pending.push(...speculativeLookups(this, entityIds, new Set(wanted.map(([key]) => key))));
    pending.push(...extra);
    for (const lookup of manyAtOnce(wanted, paged, (entry) => pending.push(entry))) pending.push(lookup);
    await pageLookups(wanted, paged, (entry) => pending.push(entry), {
      pages: this.pages,
      countsNow: () => this.countsNow(),
    });
    while (pending.length > 0) {
      const batch = pending.splice(0, lookupsPerRequest);
      const answer = await ask(batch.map((entry) => entry.lookup));
      const unheld = { [ENTITIES]: [] as string[], [RELATIONS]: [] as string[] };
      batch.forEach((entry, index) => {
        const result = answer.results[index];
        if (result === undefined) return;
        this.take(result, unheld);
        entry.done(result);
      });
      for (const root of [ENTITIES, RELATIONS] as const) {
        const ids = [...new Set(unheld[root])];
        for (let start = 0; start < ids.length; start += idsPerLookup)
          pending.push({
            lookup: { rows: root, ids: ids.slice(start, start + idsPerLookup) },
            done: () => {},
          });
      }
    }
    for (const [key, entry] of wanted) {
      if (
        entry.lookup === "entityPage" ||
        entry.lookup === "relationPage" ||
        entry.lookup === "windowPage" ||
        entry.lookup === "orderedPage" ||
        entry.lookup === "touchingPage"
      )
        continue;
      // By its parts, not its key taken apart again (a 5,000-entity page's checks add ~20,000).
      if ("id" in entry) this.known.addId(entry.lookup, entry.id, entry.kind);
      else this.known.add(key);
      // A row claims its own id: an entity (relation) found nowhere has no row of that id either.
      if (entry.lookup === "entity" || entry.lookup === "relation")
        this.known.addId(entry.lookup === "entity" ? "row" : "relationRow", entry.id);
    }
  }

  /** Reads what a call on each of a few entities reads next (`speculativeLookups`), through `ask`. */
  fillSpeculative(
    entityIds: readonly string[],
    ask: (lookups: readonly RowLookup[]) => Promise<RowSourceAnswer>,
  ): Promise<void> {
    return this.fillOnce([], ask, speculativeLookups(this, entityIds, new Set(), true));
  }

  /** The lookups of rows, entities and relations by id a fill wants, in lookups of `idsPerLookup`. */
  private lookupsByIds(wanted: readonly [string, Wanted][]): Pending[] {
    const pending: Pending[] = [];
    for (const [lookup, make] of [
      ["row", (ids: string[]) => ({ rows: ENTITIES, ids }) as RowLookup],
      ["relationRow", (ids: string[]) => ({ rows: RELATIONS, ids }) as RowLookup],
      ["entity", (ids: string[]) => ({ members: "entity", ids, limit: membersPerPage }) as RowLookup],
      ["relation", (ids: string[]) => ({ members: "relation", ids, limit: membersPerPage }) as RowLookup],
    ] as const) {
      // Entities and relations whose rows are held (a listing brought them) are asked bare: which rows
      // claim them, not those rows again (a bulk write's checks of a 5,000-entity page).
      const [bare, full] = this.partitionHeld(lookup, idsOf(wanted, lookup));
      for (const [ids, asBare] of [
        [bare, true],
        [full, false],
      ] as const)
        for (let start = 0; start < ids.length; start += idsPerLookup) {
          const made = make(ids.slice(start, start + idsPerLookup));
          pending.push({ lookup: asBare ? { ...made, bare: true } : made, done: () => {} });
        }
    }
    return pending;
  }

  /**
   * The ids of an entity or relation lookup whose claims the holders hold already (asked bare: their
   * rows are named, not sent again), and the rest; other lookups are never bare.
   */
  private partitionHeld(lookup: string, ids: readonly string[]): [string[], string[]] {
    const holder = this.holders.values().next().value;
    if (holder === undefined || (lookup !== "entity" && lookup !== "relation")) return [[], [...ids]];
    const bare: string[] = [];
    const full: string[] = [];
    for (const id of ids) (holder.holdsClaim(lookup, id) ? bare : full).push(id);
    return [bare, full];
  }

  /** One request; an answer at another version than the rows stand for is refused. */
  async ask(lookups: readonly RowLookup[], options: { quiet?: boolean } = {}): Promise<RowSourceAnswer> {
    this.requests += 1;
    const answer = await this.source.lookUp(lookups);
    if (this.version !== undefined) {
      const version = vectorKey(decodeVersion(answer.version));
      if (version !== this.version) {
        if (options.quiet === true) throw new ReadAheadDropped();
        this.movedTo = version;
        throw new DocScriptError(
          "document_changed",
          "the document changed on the server while the run read it (another client committed): run the script again",
        );
      }
    }
    if (answer.counts !== undefined) this.counts = answer.counts;
    return answer;
  }

  /** The kinds' counts, asked for when not known yet. */
  private async countsNow(): Promise<PageCounts> {
    if (this.counts === undefined) await this.ask([]);
    if (this.counts === undefined) throw new Error("the row source answered no counts");
    return this.counts;
  }

  /**
   * Every row, when the document has at most `wholeUpTo` entities (else a read of every row is
   * refused): row by row when the source offers it, else every member with its row.
   */
  private async fillWhole(): Promise<void> {
    if (Number.isFinite(this.wholeUpTo)) {
      const counts = await this.countsNow();
      const entities = Object.values(counts.entities).reduce((sum, count) => sum + count, 0);
      if (entities > this.wholeUpTo)
        throw new DocScriptError(
          "read_limit",
          `this needs every entity of the document (${entities}); the tool reads a document whole only up to ${this.wholeUpTo} entities: read by kind in pages, by id, or by entity`,
        );
    }
    const rowsAfter = this.source.rowsAfter?.bind(this.source);
    if (rowsAfter !== undefined)
      for (const root of [ENTITIES, RELATIONS] as const) {
        let after: string | undefined;
        for (;;) {
          this.requests += 1;
          const page = await rowsAfter(root, after, membersPerPage);
          for (const row of page) this.hold(root, row.rowId, row.json);
          if (page.length < membersPerPage) break;
          after = page.at(-1)?.rowId;
        }
      }
    else
      for (const members of ["entity", "relation"] as const) {
        let after: string | undefined;
        for (;;) {
          const [result] = (
            await this.ask([{ members, limit: membersPerPage, ...(after === undefined ? {} : { after }) }])
          ).results;
          for (const row of result?.rows ?? []) this.hold(row.root, row.rowId, row.json);
          if (result === undefined || result.found < membersPerPage) break;
          after = result.last;
        }
      }
    this.whole = true;
    this.known.clear();
    this.missing.clear();
  }

  /** An answer's rows held, its claimed entities known whole; a bare row not known goes to `unheld`. */
  private take(result: RowSourceAnswer["results"][number], unheld?: Record<RowRoot, string[]>): void {
    for (const row of result.rows) {
      if (row.json !== undefined) this.hold(row.root, row.rowId, row.json);
      else if (!this.known.hasId(row.root === ENTITIES ? "row" : "relationRow", row.rowId))
        unheld?.[row.root].push(row.rowId);
    }
    // A listing that read its entities' claims and variants too (`claims`): each answered whole, as
    // lookups of it would be, and so is whether a row of its id exists (a row claims its own id).
    for (const id of result.claimed ?? []) {
      this.known.addId("entity", id);
      this.known.addId("row", id);
      this.known.addId("variants", id);
    }
  }

  /**
   * Answers to another reader's lookups, of the rows at this demand's version (a tool's window pages,
   * ADR 0515), taken as answers to this demand's own: that reader's writes' checks find them held.
   */
  absorb(results: readonly RowSourceAnswer["results"][number][]): void {
    if (this.whole) return;
    for (const result of results) this.take(result);
  }

  private hold(root: "entities" | "relations", rowId: string, json: unknown): void {
    this.rowsRead += 1;
    // The row is held from now on: looking it up by id needs nothing more.
    this.known.addId(root === ENTITIES ? "row" : "relationRow", rowId);
    for (const holder of this.holders) holder.hold(root, rowId, json);
  }
}

export {
  entityPageKey,
  keyOf,
  maxListedRelations,
  orderedPageKey,
  relationPageKey,
  speculativeLimit,
  touchingPageKey,
  windowPageKey,
};

/** The ids of the wanted lookups of one kind by id. */
function idsOf(
  wanted: readonly [string, Wanted][],
  lookup: "row" | "relationRow" | "entity" | "relation",
): string[] {
  return wanted.flatMap(([, entry]) => (entry.lookup === lookup ? [entry.id] : []));
}
