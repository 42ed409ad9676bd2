/**
 * What a run's reads on demand read ahead (ADR 0506, 0510, 0513): after a small fill of several
 * entities (or a window page of a few), the other ends of their relations; after a full page of a
 * listing, the next page. The script goes on meanwhile; a fill that lacks what a read ahead brings
 * waits for it. An answer at another version is dropped unread (`ask` quietly).
 */
import type { KnownLookups } from "./demand-keys.ts";
import { entityPageKey, keyOf, windowPageKey } from "./demand-keys.ts";
import type { OnDemandProjection } from "./on-demand-projection.ts";
import type { RowLookup, RowSourceAnswer } from "./row-source.ts";
import type { ReadPage, Wanted } from "./rows-on-demand.ts";

/** Entities a fill must have read (with their relations) for a read ahead of their relations' ends. */
const readAheadFrom = 4;
/** A window page of at most this many entities reads their relations' ends ahead (`afterPages`). */
const endsReadAheadUpTo = 64;
/** Lookups a read ahead asks at most (`afterFill`): past this, none is read ahead. */
const maxReadAhead = 256;
/** Ends of a walked holder's relations read ahead at once (`afterRelations`). */
const walkChunk = 32;
/**
 * Lookups a walk's chunk asks at most after its ends' relations: a clip's three relations, its
 * medium and marker with their variants are ~9; a chunk of hubs asks nothing more.
 */
const walkFollowUps = walkChunk * 16;

type Ask = (lookups: readonly RowLookup[]) => Promise<RowSourceAnswer>;

/** What a read ahead reads through: the reads on demand it serves. */
export interface AheadSource {
  readonly known: KnownLookups;
  readonly pages: Map<string, ReadPage>;
  readonly holders: ReadonlySet<OnDemandProjection>;
  readonly speculative: boolean;
  /** Why reads ahead failed, the document moving aside (tests read it). */
  readonly readAheadErrors: string[];
  ask(lookups: readonly RowLookup[], options: { quiet?: boolean }): Promise<RowSourceAnswer>;
  fillOnce(wanted: readonly [string, Wanted][], ask: Ask): Promise<void>;
  fillSpeculative(entityIds: readonly string[], ask: Ask): Promise<void>;
}

/** A read ahead whose answer came at another version than the run's: dropped unread. */
export class ReadAheadDropped extends Error {
  constructor() {
    super("the document moved: the read ahead is dropped");
  }
}

/** The reads ahead of one `RowsOnDemand`. */
export class ReadsAhead {
  private reading = true;
  private readonly rows: AheadSource;
  /**
   * Asks for a read ahead: an answer at another version is dropped (a move found here is not the run's
   * to report; the run's own next request finds it).
   */
  private readonly quietly: Ask = (lookups) => this.rows.ask(lookups, { quiet: true });
  /** A read ahead in flight, with the ids and listing pages it asks about. */
  private ahead:
    | {
        readonly done: Promise<unknown>;
        readonly ids: ReadonlySet<string>;
        readonly keys: ReadonlySet<string>;
      }
    | undefined;

  constructor(rows: AheadSource) {
    this.rows = rows;
  }

  /**
   * Whether fills read ahead: set while a script runs, cleared once it has ended (the run's own end
   * checks read what they need; a read ahead then would outlive the run for nothing). Cleared, no page
   * stays armed for the next run.
   */
  get readsAhead(): boolean {
    return this.reading;
  }

  set readsAhead(on: boolean) {
    this.reading = on;
    if (on) return;
    this.pagesAhead.clear();
    this.walk = undefined;
  }

  /**
   * A holder's relations a script walks, their other ends read ahead a chunk at a time: the chunks, and
   * the next one not yet read.
   */
  private walk:
    | {
        holder: OnDemandProjection;
        walked: string;
        chunks: string[][];
        next: number;
        /** Every end walked: a call asking about an entity not among them asks about a far end. */
        ends: ReadonlySet<string>;
        /** Chunks are read one level deeper (`readAheadWalk`): a call asked about a far end. */
        deep: boolean;
      }
    | undefined;

  /** After a fill of the script's call: what its listing page (`afterPages`) or walk (`afterRelations`) reads next. */
  afterFilled(wanted: readonly [string, Wanted][]): void {
    this.afterPages(wanted);
    this.afterRelations(wanted);
  }

  /**
   * After a fill that read one holder's relations of a kind (`relations.of(track, "contain")`, a track
   * of thousands of clips): a script mostly goes through them in order, a call or two on each other end
   * (its marker, its medium). The first chunk of ends is read ahead at once, as a window page's are;
   * each later chunk when the script's calls first lack a row of it, and the chunk after it beside
   * (`servingFill`): a request or two per chunk instead of a request or two per end, and a script that
   * looks at the first few only never reads the rest.
   */
  private afterRelations(wanted: readonly [string, Wanted][]): void {
    const holder = this.rows.holders.values().next().value;
    if (!this.rows.speculative || !this.readsAhead || holder === undefined || wanted.length !== 1) return;
    const [, entry] = wanted[0]!;
    if (entry.lookup !== "endpoint" || entry.kind === undefined) return;
    const ends = holder.heldEnds(entry.id, entry.kind);
    if (ends.length < readAheadFrom) return;
    const chunks: string[][] = [];
    for (let start = 0; start < ends.length; start += walkChunk)
      chunks.push(ends.slice(start, start + walkChunk));
    this.walk = { holder, walked: entry.id, chunks, next: 1, ends: new Set(ends), deep: false };
    if (this.ahead === undefined) this.readAheadWalk(holder, entry.id, chunks[0]!, false);
  }

  /** The walk's next chunk read ahead (tracked as the read ahead in flight), if any is left. */
  private walkOn(): void {
    const walk = this.walk;
    if (walk === undefined || this.ahead !== undefined) return;
    const chunk = walk.chunks[walk.next];
    walk.next += 1;
    if (walk.next >= walk.chunks.length) this.walk = undefined;
    if (chunk !== undefined) this.readAheadWalk(walk.holder, walk.walked, chunk, walk.deep);
  }

  /**
   * A walk's chunk: its ends' relations and variants and those relations' claims and ends, as
   * `readAheadEnds` reads a window's few; then one level further, what a write on each end checks
   * next, once the script's calls have asked for it (`deep`: a delete's checks do, a caption created
   * beside each clip does not): the relations and variants of the entities at the far ends (a clip's
   * marker and medium, not the walked holder) and the entities of their identities (a deleted clip's
   * medium, checked for the other clips showing it). Calls lacking any of these wait for the chunk.
   */
  private readAheadWalk(
    holder: OnDemandProjection,
    walked: string,
    ids: readonly string[],
    deep: boolean,
  ): void {
    const about = new Set(ids);
    const read = async () => {
      const ends = await this.readEnds(holder, ids, walkFollowUps);
      if (ends === undefined) return;
      const far = [
        ...new Set(ends.flatMap(([, entry]) => (entry.lookup === "entity" ? [entry.id] : []))),
      ].filter((id) => id !== walked && !about.has(id) && !this.rows.known.hasId("endpoint", id));
      if (!deep || !this.reading || far.length === 0 || far.length > walkChunk * 4) return;
      for (const id of far) about.add(id);
      await this.rows.fillSpeculative(far, this.quietly);
      const checks = endsOf(
        holder,
        far.map((id) => ({ lookup: "entity", id })),
        walkFollowUps,
      );
      for (const [, entry] of checks ?? []) if ("id" in entry) about.add(entry.id);
      if (this.reading && checks !== undefined) await this.rows.fillOnce(checks, this.quietly);
    };
    this.track(about, new Set(ids.map((id) => keyOf("endpoint", id))), read());
  }

  /**
   * After a fill (`wanted`, its first level) that read one page of a listing (ADR 0510, 0513): the
   * page brought its entities with every row claiming them and their variants (`claims`), so a write
   * over it asks nothing more and no later fill shows the script at work on it. A full page reads the
   * next one ahead at once, in the background while the script goes on (a loop over pages writes this
   * one meanwhile, or reads it); a window of a few entities (markers whose clips the script writes
   * next) reads their relations and those relations' ends ahead, as an entity fill does. A kind
   * listing of a few does not: it is mostly a search for one of them (the caption track among the
   * tracks), and each track's relations are a hub's page read for nothing.
   */
  private afterPages(wanted: readonly [string, Wanted][]): void {
    const holder = this.rows.holders.values().next().value;
    if (!this.rows.speculative || !this.readsAhead || holder === undefined) return;
    const pages = wanted.filter((item): item is [string, PageWanted] => isPageWanted(item[1]));
    if (pages.length !== 1 || this.ahead !== undefined) return;
    const [key, entry] = pages[0] as [string, PageWanted];
    const page = this.rows.pages.get(key);
    if (page === undefined) return;
    const ids = pageIds(holder, entry);
    // The next page as a script asks for it: after the last entity this one listed.
    const last = ids.at(-1);
    if (!page.exhausted && page.end !== undefined && ids.length === entry.count && last !== undefined)
      this.readAheadPage(holder, { ...entry, after: last });
    else if (entry.lookup === "windowPage" && ids.length >= readAheadFrom && ids.length <= endsReadAheadUpTo)
      this.readAheadEnds(holder, ids);
  }

  /**
   * Reads in the background the relations and variants of `ids` (a page's few entities; a short page
   * each, as an entity fill reads them), then the ends of the relations of those answered whole.
   */
  private readAheadEnds(holder: OnDemandProjection, ids: readonly string[]): void {
    this.track(new Set(ids), new Set(ids.map((id) => keyOf("endpoint", id))), this.readEnds(holder, ids));
  }

  /**
   * The relations and variants of `ids`, then the claims and ends of the relations of those answered
   * whole (at most `most` lookups): the ends read, or undefined when none were (or the run ended).
   */
  private async readEnds(
    holder: OnDemandProjection,
    ids: readonly string[],
    most = maxReadAhead,
  ): Promise<[string, Wanted][] | undefined> {
    await this.rows.fillSpeculative(ids, this.quietly);
    if (!this.reading) return undefined;
    const answered: Wanted[] = ids
      .filter((id) => this.rows.known.hasId("endpoint", id))
      .map((id) => ({ lookup: "endpoint", id }));
    const ends = endsOf(holder, answered, most);
    if (ends !== undefined) await this.rows.fillOnce(ends, this.quietly);
    return ends;
  }

  /** Pages read ahead, by key: the next page to read ahead once the script lists this one. */
  private readonly pagesAhead = new Map<string, PageWanted>();

  /** A listing found its page held (`key`): one read ahead reads the next page ahead in turn. */
  listed(key: string): void {
    const next = this.pagesAhead.get(key);
    if (next === undefined) return;
    this.pagesAhead.delete(key);
    const start = () => {
      const holder = this.rows.holders.values().next().value;
      if (!this.readsAhead || this.ahead !== undefined || holder === undefined) return;
      this.readAheadPage(holder, next);
    };
    // Listed while another read ahead is in flight: the next page follows it.
    if (this.ahead === undefined) start();
    else void this.ahead.done.then(start);
  }

  /**
   * Reads `entry`'s page in the background, with every row claiming its entities and their variants
   * (`claims`): what a write over the page looks up.
   */
  private readAheadPage(holder: OnDemandProjection, entry: PageWanted): void {
    const key = pageKeyOf(entry);
    const ids = new Set<string>();
    const read = async () => {
      await this.rows.fillOnce([[key, entry]], this.quietly);
      const page = this.rows.pages.get(key);
      const listed = pageIds(holder, entry);
      const last = listed.at(-1);
      // Listed by the script, this page reads the next one ahead in turn.
      if (
        this.reading &&
        page !== undefined &&
        !page.exhausted &&
        last !== undefined &&
        listed.length === entry.count
      )
        this.pagesAhead.set(key, { ...entry, after: last });
      for (const id of listed) ids.add(id);
    };
    this.track(ids, new Set([key]), read());
  }

  /** A read ahead that is bringing what `missing` lacks is waited for; one that is not runs beside. */
  async servingFill(missing: ReadonlyMap<string, Wanted>): Promise<void> {
    // A walk's next chunk the call reaches into: read now (with what the call lacks of it), and the
    // chunk after it once this one is in.
    const walk = this.walk;
    // A call on a walked end asking about the entities beyond it: later chunks read them too.
    if (walk !== undefined && !walk.deep)
      walk.deep = [...missing.values()].some(
        (entry) =>
          entry.lookup === "identity" ||
          (entry.lookup === "endpoint" && entry.id !== walk.walked && !walk.ends.has(entry.id)),
      );
    const next = walk?.chunks[walk.next];
    const reached =
      next !== undefined && [...missing.values()].some((entry) => "id" in entry && next.includes(entry.id));
    if (reached && this.ahead !== undefined) await this.ahead.done;
    if (reached) this.walkOn();
    const ahead = this.ahead;
    if (
      ahead !== undefined &&
      [...missing.entries()].some(
        ([key, entry]) => ahead.keys.has(key) || ("id" in entry && ahead.ids.has(entry.id)),
      )
    ) {
      await ahead.done;
      if (this.ahead === ahead) this.ahead = undefined;
    }
    if (reached) this.walkOn();
  }

  /**
   * After a small fill of several entities (a listing's), reads in the background what a call on each
   * usually reads next: the entities at the other ends of the relations of each entity just read (a
   * marker's clip), with their relations, and the variants and identity of each entity read (a
   * medium's, checked when the clips showing it are deleted), in one request. The script goes on
   * meanwhile; a call that lacks rows waits for it, then asks only what it did not bring. A loop over
   * ten markers that writes each one's clip asks once for the clips instead of once a clip (ADR 0506).
   * An answer at another version is dropped unread: its rows are never held beside the version the
   * run reads.
   */
  afterFill(holder: OnDemandProjection, answered: readonly [string, Wanted][]): void {
    if (!this.readsAhead) return;
    const entries: Wanted[] = [];
    const entities: Wanted[] = [];
    for (const [, entry] of answered) {
      if (entry.lookup === "endpoint" && entry.kind === undefined) entries.push(entry);
      else if (entry.lookup === "entity" && this.rows.known.hasId("endpoint", entry.id)) {
        entries.push({ lookup: "endpoint", id: entry.id });
        entities.push(entry);
      }
    }
    // A fill of a few entities is a call about them (a move, a clip's update), whose next request is
    // its own: a read ahead beside it only delays it (the server answers a document's reads in turn).
    if (entries.length < readAheadFrom) return;
    // The entities read are checked too: their variants and the entities of their identities, when
    // they fit in the read ahead with the ends.
    const next = endsOf(holder, [...entries, ...entities]) ?? endsOf(holder, entries);
    if (next === undefined) return;
    const ids = new Set(next.flatMap(([, entry]) => ("id" in entry ? [entry.id] : [])));
    this.track(ids, new Set(), this.rows.fillOnce(next, this.quietly));
  }

  /** `reading` becomes the read ahead in flight, about `ids` and listing pages `keys`, until it ends. */
  private track(ids: ReadonlySet<string>, keys: ReadonlySet<string>, reading: Promise<unknown>): void {
    const ahead = {
      ids,
      keys,
      done: reading
        .catch((error: unknown) => {
          // Nothing is lost: a call that needs these rows asks for them. A failure other than the
          // document moving is kept where tests see it (a refused lookup once hid here).
          if (error instanceof ReadAheadDropped) return;
          const errors = this.rows.readAheadErrors;
          if (errors.length < 10) errors.push(error instanceof Error ? error.message : String(error));
        })
        .finally(() => {
          if (this.ahead === ahead) this.ahead = undefined;
        }),
    };
    this.ahead = ahead;
  }
}

/**
 * What a call on the entities whose relations `answered` holds reads next (`followUps`: the relations'
 * claims, their other ends and those ends' variants); undefined when nothing, or more than a read ahead
 * asks (`maxReadAhead`).
 */
function endsOf(
  holder: OnDemandProjection,
  answered: readonly Wanted[],
  most = maxReadAhead,
): [string, Wanted][] | undefined {
  const next = [...holder.followUps(answered).entries()];
  return next.length === 0 || next.length > most ? undefined : next;
}

/** A listing's page read by kind, or by a window on a number field. */
type PageWanted = Extract<Wanted, { lookup: "entityPage" | "windowPage" }>;

function isPageWanted(entry: Wanted): entry is PageWanted {
  return entry.lookup === "entityPage" || entry.lookup === "windowPage";
}

function pageKeyOf(entry: PageWanted): string {
  return entry.lookup === "windowPage"
    ? windowPageKey(entry.kind, entry.window, entry.after, entry.count)
    : entityPageKey(entry.kind, entry.after, entry.count);
}

/** The entities a page read lists, as the holder finds them held. */
function pageIds(holder: OnDemandProjection, entry: PageWanted): string[] {
  return entry.lookup === "windowPage"
    ? holder.entityIdsInWindow(entry.kind, entry.window, entry.after, entry.count)
    : holder.entityIdsAfter(entry.kind, entry.after, entry.count);
}
