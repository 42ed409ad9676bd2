/**
 * The document server's core: documents kept open in memory (bounded), each with its projection, so a
 * push is checked by forking, importing only the update and re-reading only the rows it touched.
 */
import { timingSafeEqual } from "node:crypto";
import { type Logger, silentLogger } from "@tackle/core";
import { decodeVersion, encodeVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { AppendWaiters } from "./append-waiters.ts";
import { type DocumentStore, StoreConflictError } from "./document-store.ts";
import { type Authorization, type DocumentHostOptions, hashToken, type PlanState } from "./host-options.ts";
import { IdleWork } from "./idle-work.ts";
import {
  catchUpSlice,
  describeError,
  forkTakesOver,
  forkTakesOverAtoms,
  heldRowsBound,
  importLater,
  type LogState,
  type OpenDocument,
  opsOf,
  type PushOptions,
  StaleRowsError,
} from "./open-document.ts";
import { OpenDocuments } from "./open-documents.ts";
import {
  type EntityPageQuery,
  entityPageOf,
  type PageSources,
  type RelationPageQuery,
  relationPageOf,
  rowLookupOf,
} from "./page-answers.ts";
import { PartStager } from "./part-stager.ts";
import { plansApplied } from "./plan-index.ts";
import { appliedPlans } from "./push-checks.ts";
import { decodePush, type Judged, judgeFilled, type Prepared, preparePush } from "./push-judge.ts";
import type { PushResult } from "./push-result.ts";
import { partsFitPush, type StageAnswer } from "./push-stage.ts";
import { membersOfRow } from "./row-members.ts";
import type { EntityPage, RelationPage, RowLookup, RowLookupAnswer } from "./row-reads.ts";
import { checkedSnapshot, createdRows } from "./snapshot-checks.ts";
import { yieldToEventLoop } from "./snapshot-history.ts";
import { storeProjection } from "./store-rows.ts";

export { type Authorization, type DocumentHostOptions, hashToken, type PlanState } from "./host-options.ts";
export type { PushOptions } from "./open-document.ts";
export {
  type EntityPage,
  type PageCounts,
  type RelationPage,
  type RowLookup,
  type RowLookupAnswer,
  rowLookupLimits,
} from "./row-reads.ts";

export class DocumentHost {
  readonly schema: Schema;
  private readonly store: DocumentStore;
  private readonly compactEvery: number;
  private readonly compactLogBytes: number;
  private readonly compactAgeMs: number;
  private readonly maxOpen: number;
  private readonly forkAtoms: number;
  private readonly logger: Logger;
  private readonly docs: OpenDocuments;
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly waiters: AppendWaiters;
  /** Parts of runs' updates staged ahead of their pushes (ADR 0508). */
  private readonly stager: PartStager;
  /** Work done while a document is asked nothing: staged parts (ADR 0508). */
  private readonly idle = new IdleWork({
    busy: (documentId) => this.queues.get(documentId),
    inTurn: (documentId, work) => this.serialized(documentId, work),
  });
  /** What the pages and row lookups read: the store's rows, and the open documents' heads. */
  private readonly pages: PageSources;

  constructor(options: DocumentHostOptions) {
    this.store = options.store;
    this.schema = options.schema;
    this.compactEvery = options.compactEvery ?? 100;
    this.compactLogBytes = options.compactLogBytes ?? 1024 * 1024;
    this.compactAgeMs = options.compactAgeMs ?? 10 * 60_000;
    this.maxOpen = options.maxOpenDocuments ?? 64;
    this.forkAtoms = options.forkTakesOverAtoms ?? forkTakesOverAtoms;
    this.logger = options.logger ?? silentLogger;
    this.waiters = new AppendWaiters(this.store, this.logger);
    this.docs = new OpenDocuments({
      store: this.store,
      schema: this.schema,
      maxOpen: this.maxOpen,
      logDue: (open) => this.logDue(open),
      compactLater: (documentId) => this.compactLater(documentId),
      indexLater: (documentId) => this.indexLater(documentId),
    });
    this.pages = { store: this.store, schema: this.schema, docs: this.docs };
    this.stager = new PartStager({
      docs: this.docs,
      idle: this.idle,
      logger: this.logger,
      store: this.store,
    });
  }

  /**
   * Creates a document (empty, or from a snapshot checked as a push is, ADR 0553: `checkedSnapshot`).
   * False when it exists (or is being created). A large snapshot's work is done in steps between which
   * the event loop runs (ADR 0554, 0560), so other requests are answered meanwhile.
   */
  async create(documentId: string, token: string, snapshot?: Uint8Array): Promise<boolean> {
    const { doc, projection, maps } = await checkedSnapshot(this.schema, snapshot);
    const step = async <T>(work: () => T): Promise<T> => {
      if (snapshot !== undefined) await yieldToEventLoop();
      return work();
    };
    const rows = await createdRows(doc, projection, maps);
    // The plans its history carries: the plan index holds the whole history from the start.
    const plans = await step(() => appliedPlans(doc));
    const stored = await step(() => doc.export({ mode: "snapshot" }));
    return this.store.createDocument({
      documentId,
      tokenHash: hashToken(token),
      snapshot: stored,
      snapshotVersion: doc.oplogVersion().encode(),
      rows,
      issues: [],
      plans,
    });
  }

  async authorize(documentId: string, token: string | undefined): Promise<Authorization> {
    const stored = this.docs.open.get(documentId)?.tokenHash ?? (await this.store.tokenHash(documentId));
    if (stored === undefined) return "not_found";
    if (token === undefined || token === "") return "missing";
    const given = Buffer.from(hashToken(token), "hex");
    return timingSafeEqual(given, Buffer.from(stored, "hex")) ? "ok" : "forbidden";
  }

  /** The whole document and its version. */
  async snapshot(documentId: string): Promise<{ bytes: Uint8Array; version: string }> {
    try {
      return await this.serialized(documentId, async () => {
        const open = await this.docs.current(documentId);
        return {
          bytes: open.doc.export({ mode: "snapshot" }),
          version: encodeVersion(open.doc.oplogVersion()),
        };
      });
    } finally {
      this.docs.readyLater(documentId, (work) => this.serialized(documentId, work), this.logger);
    }
  }

  /**
   * The updates a client at `since` lacks, and the version they bring it to. With `waitMs`, a client
   * that lacks nothing waits up to that long for the next push through this server or (on a store
   * that announces appends, PostgreSQL) through any other, and gets it as soon as it is stored. An
   * aborted `signal` (the client left) ends the wait at once, with what there is.
   */
  async updatesSince(
    documentId: string,
    since: string,
    waitMs = 0,
    options: { readonly signal?: AbortSignal | undefined } = {},
  ): Promise<{ bytes: Uint8Array; version: string }> {
    try {
      return await this.updatesOf(documentId, since, waitMs, options.signal);
    } finally {
      this.docs.readyLater(documentId, (work) => this.serialized(documentId, work), this.logger);
    }
  }

  private async updatesOf(documentId: string, since: string, waitMs: number, signal?: AbortSignal) {
    const from = decodeVersion(since);
    const deadline = performance.now() + waitMs;
    if (waitMs > 0) await this.waiters.watch();
    for (;;) {
      // Listen before reading, so a push stored between the read and the wait still wakes it.
      const next = waitMs > 0 ? this.waiters.next(documentId) : undefined;
      const answer = await this.serialized(documentId, async () => {
        // Its ops alone: read from the replica that holds them while the live document catches up.
        const ops = opsOf(await this.docs.current(documentId));
        const version = ops.oplogVersion();
        const comparison = version.compare(from);
        return {
          bytes: ops.export({ mode: "update", from }),
          version: encodeVersion(version),
          // Equal or behind: nothing the client lacks.
          lacking: comparison === undefined || comparison > 0,
        };
      });
      const remaining = deadline - performance.now();
      if (next === undefined || answer.lacking || remaining <= 0 || signal?.aborted === true) {
        next?.cancel();
        return { bytes: answer.bytes, version: answer.version };
      }
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      await Promise.race([
        next.appended,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, remaining);
          onAbort = resolve;
          signal?.addEventListener("abort", onAbort, { once: true });
        }),
      ]);
      clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      next.cancel();
    }
  }

  /** Whether a plan id was applied to the document (after every push queued before this call). */
  async planState(documentId: string, planId: string): Promise<PlanState> {
    return this.serialized(documentId, async () => {
      const open = await this.docs.current(documentId);
      const applied = (await plansApplied(this.store, documentId, open, [planId])).get(planId);
      const version = encodeVersion(opsOf(open).oplogVersion());
      return applied === undefined ? { state: "unknown", version } : { state: "applied", version: applied };
    });
  }

  /**
   * Checks an update in a fork and stores it unless it is rejected, a duplicate of a plan already
   * applied, or conflicted (some of its writes no longer apply) without `applyRemaining`.
   */
  async push(documentId: string, bytes: Uint8Array, options: PushOptions | string = {}): Promise<PushResult> {
    const pushOptions: PushOptions = typeof options === "string" ? { actor: options } : options;
    const actor = pushOptions.actor;
    return this.serialized(documentId, async () => {
      // Across servers sharing the store: one push per document at a time, so every push is checked
      // against every update stored before it and the log keeps one order.
      const release = await this.store.lockDocument?.(documentId);
      try {
        return await this.pushLocked(documentId, bytes, pushOptions, actor);
      } finally {
        await release?.();
      }
    });
  }

  private async pushLocked(
    documentId: string,
    bytes: Uint8Array,
    pushOptions: PushOptions,
    actor: string | undefined,
  ): Promise<PushResult> {
    // The parts staged ahead of this push, and their reads, done now if not done yet.
    await this.idle.drain(documentId);
    for (let attempt = 0; ; attempt++) {
      let open: Awaited<ReturnType<OpenDocuments["withIssues"]>>;
      try {
        open = await this.docs.withIssues(documentId);
      } catch (error) {
        // Another server moved the store's rows on while its issues were read from them.
        if (await this.rowsReadAfresh(documentId, error, attempt)) continue;
        throw error;
      }
      const decoded = decodePush(bytes);
      if ("result" in decoded) return decoded.result;
      // Parts staged of another update than this one are not judged with it (ADR 0508).
      if (!partsFitPush(open, decoded.meta)) open.shadow = undefined;
      await this.docs.shadowOf(documentId, open);
      // What it carries past parts held detached, staged and read like them (ADR 0517).
      await this.stager.stageTail(documentId, open, bytes, decoded.meta);
      const prepared = preparePush(open, bytes, decoded.meta);
      if ("result" in prepared) return prepared.result;
      if (
        prepared.planIds.length > 0 &&
        (await plansApplied(this.store, documentId, open, prepared.planIds)).size > 0
      ) {
        // The same plan, applied before under other bytes (a re-derived plan): applying it again would
        // apply its edit twice.
        return { status: "committed", version: encodeVersion(open.doc.oplogVersion()), duplicate: true };
      }
      let outcome: Judged;
      try {
        outcome = await this.judged(documentId, open, prepared, pushOptions);
      } catch (error) {
        // The store's rows moved under the projection (another server wrote them).
        if (await this.rowsReadAfresh(documentId, error, attempt, open)) continue;
        throw error;
      }
      if (outcome.undo === undefined) return outcome.result;
      const status = outcome.result.status === "conflicted" ? "conflicted" : "committed";
      // The version the push takes the document to: what the plan index records for its plans.
      const pushedVersion = encodeVersion((outcome.fork ?? open.doc).oplogVersion());
      const seq = open.seq + 1;
      const stored = outcome.bytes ?? bytes;
      try {
        await this.store.append({
          documentId,
          seq,
          bytes: stored,
          status,
          ...(actor === undefined ? {} : { actor }),
          ...(outcome.rows === undefined ? {} : { rows: outcome.rows }),
          ...(outcome.change === undefined ? {} : { change: outcome.change }),
          ...(outcome.issues === undefined ? {} : { issues: outcome.issues }),
          plans: new Map((outcome.planIds ?? []).map((planId) => [planId, pushedVersion])),
        });
      } catch (error) {
        outcome.undo();
        // Another server appended first: catch up and check again against the merged document.
        if (StoreConflictError.isInstance(error) && attempt < 5) continue;
        throw error;
      }
      if (outcome.fork?.isDetached() === true) {
        // Judged in a detached replica, which holds the update's ops and not their state (ADR 0517):
        // the live document imports it after the answer, before anything reads it.
        importLater(open, [...(prepared.held ?? []), stored], outcome.fork);
        open.shadow = undefined;
        open.forkNext = true;
        this.catchUpLater(documentId, open);
      } else if (outcome.fork !== undefined && forkTakesOver(outcome.fork, prepared.spans, this.forkAtoms)) {
        // Imported again, a large update costs Loro as much as it did in the fork (the first write to
        // each container it touches): the fork, which holds the stored update, becomes the live
        // document, and the next push's replica is forked from it (ADR 0496).
        open.doc = outcome.fork;
        open.shadow = undefined;
        open.forkNext = true;
      } else {
        // The live document takes the same update the fork took: the two are replicas again.
        open.doc.import(stored);
        open.shadow = outcome.fork;
      }
      open.seq = seq;
      if (outcome.issues !== undefined) open.issues = outcome.issues;
      // The rows a document's pushes looked up stay held for the next push, up to a bound.
      if (!open.projection.demand.whole && open.projection.rowCount > heldRowsBound)
        open.projection = storeProjection(this.schema, this.store, documentId);
      this.waiters.wake(documentId);
      open.logBytes += stored.length;
      open.logSince ??= Date.now();
      if (this.logDue(open)) this.compactLater(documentId);
      return outcome.result;
    }
  }

  /** Whether a push attempt that failed on moved rows (`StaleRowsError`) resets its projection and retries. */
  private async rowsReadAfresh(id: string, error: unknown, attempt: number, open?: OpenDocument) {
    if (!(error instanceof StaleRowsError) || attempt >= 5) return false;
    (open ?? (await this.docs.current(id))).projection = storeProjection(this.schema, this.store, id);
    return true;
  }

  /**
   * Stages a part of a run's update ahead of its push (ADR 0508), as work done while the document is
   * asked nothing else; a part not staged is no error: its push is judged as any push.
   */
  stage(documentId: string, bytes: Uint8Array, maxBytes: number): Promise<StageAnswer> {
    return this.stager.stage(documentId, bytes, maxBytes);
  }

  /** Waits for queued work (a compaction that runs after its push answered) and drops open documents. */
  async close(): Promise<void> {
    this.idle.clear();
    while (this.queues.size > 0) await Promise.all([...this.queues.values()]);
    this.docs.open.clear();
  }

  /** Drops every open document (they reload from the store on next use). */
  forget(): void {
    this.docs.open.clear();
  }

  /** A prepared push judged with what its check reads filled from the store (`judgeFilled`). */
  private judged(
    documentId: string,
    open: OpenDocument & { issues: DocumentIssue[] },
    prepared: Prepared,
    options: PushOptions,
  ): Promise<Judged> {
    return judgeFilled(this.schema, open, prepared, options, {
      fill: () => this.docs.fill(documentId, open.projection, open.seq),
      judgedIn: (rounds, fills) =>
        this.logger.debug("docscript: push judged", {
          documentId,
          rounds,
          fills,
          readBefore: prepared.reads.readBefore,
          detached: prepared.fork.isDetached(),
        }),
    });
  }

  /** Whether the log after the snapshot is long, large or old enough to be compacted (ADR 0477). */
  private logDue(log: LogState): boolean {
    if (log.seq === log.snapshotSeq) return false;
    return (
      log.seq - log.snapshotSeq >= this.compactEvery ||
      log.logBytes >= this.compactLogBytes ||
      (log.logSince !== undefined && Date.now() - log.logSince >= this.compactAgeMs)
    );
  }

  /** Indexes the number fields of a document stored before the window index, from its stored rows. */
  private indexLater(documentId: string): void {
    void this.serialized(documentId, () =>
      this.store.indexNumbers(documentId, (root, rowId, json) =>
        membersOfRow(this.schema, root, rowId, json),
      ),
    ).catch((error: unknown) => {
      this.logger.error("docscript: indexing number fields failed; windows read every entity of a kind", {
        documentId,
        error: describeError(error),
      });
    });
  }

  /**
   * Imports what the live document lacks (`importLater`, ADR 0517) a part at a time as idle work; a
   * document that cannot take it is dropped, and opens afresh from the store.
   */
  private catchUpLater(documentId: string, open: OpenDocument): void {
    this.idle.add(documentId, async () => {
      if (this.docs.open.get(documentId) !== open) return;
      try {
        if (catchUpSlice(open)) this.catchUpLater(documentId, open);
        else this.docs.readyLater(documentId, (work) => this.serialized(documentId, work), this.logger);
      } catch (error) {
        this.docs.open.delete(documentId);
        this.logger.error("docscript: the live document did not take a stored update; it opens afresh", {
          documentId,
          error: describeError(error),
        });
      }
    });
  }

  private compactLater(documentId: string): void {
    void this.serialized(documentId, async () => {
      // A page answered without opening the document (`pageHead`) leaves it to be opened here.
      const open = this.docs.open.get(documentId) ?? (await this.docs.current(documentId));
      if (open.seq === open.snapshotSeq) return;
      const snapshot = open.doc.export({ mode: "snapshot" });
      const through = open.seq;
      await this.store.compact(documentId, snapshot, through, open.doc.oplogVersion().encode());
      open.snapshotSeq = through;
      open.logBytes = 0;
      open.logSince = undefined;
    }).catch((error: unknown) => {
      this.logger.error("docscript: compaction failed; the update log keeps growing until the next try", {
        documentId,
        error: describeError(error),
      });
    });
  }

  /**
   * A page of entities in id order, read from the store's rows (never the Loro document): by kinds
   * and/or ids, after a cursor; a variant with its base applied. With the document's version, its
   * issues and how many entities and relations it has.
   */
  async entityPage(documentId: string, query: EntityPageQuery): Promise<EntityPage> {
    return this.serialized(documentId, () => entityPageOf(this.pages, documentId, query));
  }

  /** A page of relations in id order, read from the store's rows: by kinds, ids, an endpoint, after a cursor. */
  async relationPage(documentId: string, query: RelationPageQuery): Promise<RelationPage> {
    return this.serialized(documentId, () => relationPageOf(this.pages, documentId, query));
  }

  /**
   * Stored rows by id, or by the members a query finds, at the document's current version (its rows
   * caught up first), for a reader that keeps a projection of only what it looked up (ADR 0466); with
   * `issues`, the document's issues too (a `snapshot` page's head).
   */
  async rowLookup(
    documentId: string,
    lookups: readonly RowLookup[],
    options: { issues?: boolean } = {},
  ): Promise<RowLookupAnswer> {
    return this.serialized(documentId, () =>
      this.docs.servedRows(documentId, () => rowLookupOf(this.pages, documentId, lookups, options)),
    );
  }

  /** Runs `work` after every earlier call on the same document. */
  private serialized<T>(documentId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(documentId) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(documentId, settled);
    void settled.then(() => {
      if (this.queues.get(documentId) === settled) this.queues.delete(documentId);
    });
    return next;
  }
}
