/**
 * The documents a server keeps open (bounded, least recently used first out): each loaded from the
 * store's snapshot and log, caught up with what other servers appended, its rows and issues read
 * from the store on need (ADR 0465, 0466).
 */

import type { Logger } from "@tackle/core";
import { decodeImportBlobMeta, type Frontiers, LoroDoc, type PeerID, VersionVector } from "loro-crdt";
import { checkDocument } from "../document/check-document.ts";
import { projectDocument, refreshRows } from "../document/interpret.ts";
import type { OnDemandProjection } from "../document/on-demand-projection.ts";
import { readyForImports } from "../document/ready-for-imports.ts";
import { encodeVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { changedRows } from "./changed-rows.ts";
import type { DocumentStore } from "./document-store.ts";
import {
  describeError,
  importLogged,
  isBehind,
  type LogState,
  type OpenDocument,
  openDocumentOf,
  opsOf,
  StaleRowsError,
  servedRowsBound,
} from "./open-document.ts";
import { planIdsOf } from "./push-checks.ts";
import { nextIssues, stageChange } from "./push-staging.ts";
import { allRowChanges, rowChanges } from "./row-members.ts";
import type { RowLookupAnswer } from "./row-reads.ts";
import { storeProjection } from "./store-rows.ts";

export class OpenDocuments {
  /** By document id, least recently used first. */
  readonly open = new Map<string, OpenDocument>();
  /** Documents whose next push's check is to be readied once the call is answered (`readyLater`). */
  private readonly readying = new Set<string>();
  private readonly store: DocumentStore;
  private readonly schema: Schema;
  private readonly maxOpen: number;
  /** Whether a document's log is due to be compacted, and compacting it once the current call is answered. */
  private readonly logDue: (log: LogState) => boolean;
  private readonly compactLater: (documentId: string) => void;
  /** Indexing a document's number fields (stored before the index) once the current call is answered. */
  private readonly indexLater: (documentId: string) => void;

  constructor(options: {
    store: DocumentStore;
    schema: Schema;
    maxOpen: number;
    logDue: (log: LogState) => boolean;
    compactLater: (documentId: string) => void;
    indexLater: (documentId: string) => void;
  }) {
    this.store = options.store;
    this.schema = options.schema;
    this.maxOpen = options.maxOpen;
    this.logDue = options.logDue;
    this.compactLater = options.compactLater;
    this.indexLater = options.indexLater;
  }

  /**
   * A replica of the open document for pushes to be checked in: imported from the stored snapshot and
   * log (Loro imports a snapshot lazily: seconds at 1M entities), not forked from the live document
   * (a fork exports the whole state first: 31 s at 1M). A fork when the store no longer holds that
   * version (compacted past it) or the import does not come out at the live document's version.
   */
  async replicaOf(documentId: string, open: OpenDocument): Promise<LoroDoc> {
    const stored = await this.store.load(documentId);
    if (stored !== undefined && stored.snapshotSeq <= open.seq) {
      const replica = LoroDoc.fromSnapshot(stored.snapshot);
      const updates = stored.updates.filter((update) => update.seq <= open.seq);
      importLogged(replica, updates);
      if (replica.cmpFrontiers(replica.frontiers(), open.doc.frontiers()) === 0) return replica;
    }
    return open.doc.fork();
  }

  /**
   * Once the call just answered (a read of the document: a snapshot, the updates a client lacks), the
   * next push's check is readied (ADR 0504), queued on the document like any call; never inside a push,
   * so the pull that follows a commit is answered first.
   */
  readyLater(documentId: string, queue: (work: () => Promise<void>) => Promise<void>, logger: Logger): void {
    if (this.readying.has(documentId)) return;
    this.readying.add(documentId);
    // A macrotask later: the answer has been handed to the connection by then.
    setImmediate(() => {
      this.readying.delete(documentId);
      queue(() => this.readyNextPush(documentId)).catch((error: unknown) => {
        logger.warn("docscript: readying the next push's check failed; the push does it", {
          documentId,
          error: describeError(error),
        });
      });
    });
  }

  /**
   * Readies the open document for the next push (ADR 0504): its replica made (from the store, or a
   * fork after a large push, ADR 0496), and it and the live document made ready for imports.
   */
  async readyNextPush(documentId: string): Promise<void> {
    const open = this.open.get(documentId);
    // A document catching up with its last push (ADR 0517) is readied once it has.
    if (open === undefined || isBehind(open)) return;
    readyForImports(open.doc);
    readyForImports(await this.shadowOf(documentId, open));
  }

  /** The open document's shadow, the replica pushes are imported into: made when it has none. */
  async shadowOf(documentId: string, open: OpenDocument): Promise<LoroDoc> {
    if (open.shadow === undefined) {
      open.shadow = open.forkNext === true ? open.doc.fork() : await this.replicaOf(documentId, open);
      open.forkNext = false;
    }
    return open.shadow;
  }

  /**
   * Rows read for another reader (`read`: a tool's lookups, its window pages), held in this server's
   * projection of the document too when it is open at the version the rows stand for (ADR 0515): the
   * checks of that reader's writes, staged and pushed next, then find them held, not read again. Up to
   * `servedRowsBound` rows held in all; a document not open is not opened for it.
   */
  async servedRows<T extends RowLookupAnswer>(documentId: string, read: () => Promise<T>): Promise<T> {
    const open = this.open.get(documentId);
    if (open === undefined || open.projection.demand.whole) return read();
    const before = await this.store.rowsSeq(documentId);
    const answer = await read();
    if (before !== open.seq || this.open.get(documentId) !== open) return answer;
    const rows = answer.results.reduce((sum, result) => sum + result.rows.length, 0);
    if (open.projection.rowCount + rows > servedRowsBound) return answer;
    if ((await this.store.rowsSeq(documentId)) === open.seq) open.projection.demand.absorb(answer.results);
    return answer;
  }

  /** Reads what the projection lacked from the store's rows, which must hold through `seq`. */
  async fill(documentId: string, projection: OnDemandProjection, seq: number): Promise<void> {
    await projection.demand.fill();
    const rowsSeq = await this.store.rowsSeq(documentId);
    if (rowsSeq !== seq) throw new StaleRowsError(documentId, seq, rowsSeq);
  }

  /**
   * The open document, loaded or caught up with updates other servers appended, with the store's rows
   * holding through its seq: rows another server left behind (an update appended without them) are
   * written here, from the updates themselves, before anything reads them.
   */
  async current(documentId: string): Promise<OpenDocument> {
    const open = this.open.get(documentId);
    if (open === undefined) return this.load(documentId);
    // Refresh the LRU order.
    this.open.delete(documentId);
    this.open.set(documentId, open);
    const newer = await this.store.updatesAfter(documentId, open.seq);
    // Another server compacted past what this one holds: the updates in between are gone from the
    // log (a gap, or nothing after a snapshot newer than ours), so load the document afresh.
    const first = newer[0];
    const compactedPast =
      first === undefined
        ? ((await this.store.snapshotSeq?.(documentId)) ?? 0) > open.seq
        : first.seq !== open.seq + 1;
    const rowsSeq = await this.store.rowsSeq(documentId);
    // Rows behind what this server holds (its own last push found them behind): load afresh too.
    if (compactedPast || rowsSeq === undefined || rowsSeq < open.seq) {
      this.open.delete(documentId);
      return this.load(documentId);
    }
    const withRows = newer.filter((update) => update.seq <= rowsSeq);
    if (withRows.length > 0) {
      const before = open.doc.frontiers();
      importLogged(open.doc, withRows);
      const rows = changedRows(open.doc, before, open.doc.frontiers(), open.index);
      refreshRows(open.projection, open.doc, rows, open.index);
      // The other server stored the issues and rows these updates left: read them again on need.
      open.issues = undefined;
      this.catchUpPlans(open, before);
      // Another server's updates: the fork is made anew from the live document on the next push.
      open.shadow = undefined;
      open.seq = withRows.at(-1)?.seq ?? open.seq;
    }
    const without = newer.filter((update) => update.seq > rowsSeq);
    if (without.length > 0) await this.writeRowsOf(documentId, open, without);
    return open;
  }

  /**
   * What a page needs of a document, its version and issues, without loading a document that is not
   * open: its version from the snapshot's stored version and the logged updates' headers, its issues
   * those kept with its rows. Loading it (a 168 MB snapshot at 1M entities, seconds) waits for a call
   * that needs the document itself. A document this server holds open, whose rows do not hold through
   * its log (they are written from the updates) or whose snapshot's version is not stored, is opened.
   */
  async pageHead(documentId: string): Promise<{ version: string; issues: DocumentIssue[] }> {
    if (!this.open.has(documentId)) {
      const head = await this.unopenedHead(documentId);
      if (head !== undefined) return head;
    }
    const open = await this.withIssues(documentId);
    // Its ops alone: a page right after a detached push does not wait for the live document (ADR 0517).
    return { version: pageVersion(opsOf(open).oplogVersion().toJSON()), issues: open.issues };
  }

  private async unopenedHead(
    documentId: string,
  ): Promise<{ version: string; issues: DocumentIssue[] } | undefined> {
    const head = await this.store.loadHead?.(documentId);
    if (head?.snapshotVersion === undefined) return undefined;
    const seq = head.updates.at(-1)?.seq ?? head.snapshotSeq;
    const issues = await this.storedIssues(documentId, seq);
    if (issues === undefined) return undefined;
    // A logged update holds the changes from its start to its end version: the log's version is the
    // snapshot's with each peer's end taken to the furthest update (the log holds every dependency).
    const ends = VersionVector.decode(head.snapshotVersion).toJSON();
    for (const update of head.updates)
      for (const [peer, end] of decodeImportBlobMeta(update.bytes, false).partialEndVersionVector.toJSON())
        ends.set(peer, Math.max(end, ends.get(peer) ?? 0));
    // A log long or large enough is compacted once this page is answered, as when a document opens.
    const logBytes = head.updates.reduce((sum, update) => sum + update.bytes.length, 0);
    if (this.logDue({ seq, snapshotSeq: head.snapshotSeq, logBytes, logSince: undefined }))
      this.compactLater(documentId);
    return { version: pageVersion(ends), issues };
  }

  /** Opens a document: imports its snapshot and log, reading nothing out of them. */
  private async load(documentId: string): Promise<OpenDocument> {
    const stored = await this.store.load(documentId);
    if (stored === undefined)
      throw DocScriptError.notFound("document", documentId, `no document ${documentId}`);
    const rowsSeq = await this.store.rowsSeq(documentId);
    const doc = LoroDoc.fromSnapshot(stored.snapshot);
    // A snapshot stored without its version (before migration 8) gets it, for pages that do not load it.
    if (stored.snapshotVersion === undefined)
      await this.store.keepSnapshotVersion?.(documentId, stored.snapshotSeq, doc.oplogVersion().encode());
    // Rows kept through a seq the log still holds: the updates after it are written to the rows one
    // by one below. Otherwise (a document stored before rows were kept, or rows behind a compaction)
    // the document is read whole once (rows read plainly: a deep read with container ids costs ~5×
    // more) and its rows replaced.
    const incremental = rowsSeq !== undefined && rowsSeq >= stored.snapshotSeq;
    const withRows = stored.updates.filter((update) => incremental && update.seq <= rowsSeq);
    importLogged(doc, withRows);
    const without = stored.updates.slice(withRows.length);
    // Nothing is read out of the document: rows come from the store's projection when a push or a
    // page needs them. The container index fills as pushes touch rows, each container found through
    // the op that created it.
    const open = openDocumentOf(
      {
        shadow: undefined,
        index: new Map(),
        projection: storeProjection(this.schema, this.store, documentId),
        issues: undefined,
        seq: withRows.at(-1)?.seq ?? stored.snapshotSeq,
        snapshotSeq: stored.snapshotSeq,
        logBytes: stored.updates.reduce((sum, update) => sum + update.bytes.length, 0),
        logSince: stored.updates.length === 0 ? undefined : Date.now(),
        tokenHash: stored.tokenHash,
        plans: undefined,
      },
      doc,
    );
    this.open.set(documentId, open);
    while (this.open.size > this.maxOpen) {
      const oldest = this.open.keys().next().value as string;
      this.open.delete(oldest);
    }
    if (incremental) {
      if (without.length > 0) await this.writeRowsOf(documentId, open, without);
      // Rows stored before the window index (migration 7): their number fields indexed from the rows.
      if (!(await this.store.numbersIndexed(documentId))) this.indexLater(documentId);
    } else {
      importLogged(doc, without);
      open.seq = without.at(-1)?.seq ?? open.seq;
      const whole = projectDocument(doc, this.schema);
      open.issues = checkDocument(whole);
      await this.store.replaceRows(documentId, open.seq, allRowChanges(whole), open.issues);
    }
    // A log long or large enough is compacted once this call is answered, so the next open is quick.
    if (this.logDue(open)) this.compactLater(documentId);
    return open;
  }

  /**
   * Imports updates the log holds but the rows do not, one at a time, and writes the rows each
   * changed and the issues after it (as the push that stored it would have), unless another server
   * wrote them first.
   */
  private async writeRowsOf(
    documentId: string,
    open: OpenDocument,
    updates: readonly { seq: number; bytes: Uint8Array }[],
  ): Promise<void> {
    open.shadow = undefined;
    let issues = await this.issuesOf(documentId, open);
    let writing = true;
    for (const update of updates) {
      const before = open.doc.frontiers();
      open.doc.import(update.bytes);
      const rows = changedRows(open.doc, before, open.doc.frontiers(), open.index);
      this.catchUpPlans(open, before);
      if (!writing) {
        refreshRows(open.projection, open.doc, rows, open.index);
        open.seq = update.seq;
        continue;
      }
      let staged = stageChange(open.projection, open.doc, rows);
      try {
        while (open.projection.lacking) {
          staged.undo();
          await this.fill(documentId, open.projection, open.seq);
          staged = stageChange(open.projection, open.doc, rows);
        }
      } catch (error) {
        if (!(error instanceof StaleRowsError)) throw error;
        // Another server is writing these rows: leave it to them and hold nothing stale.
        open.projection = storeProjection(this.schema, this.store, documentId);
        writing = false;
        open.seq = update.seq;
        continue;
      }
      issues = nextIssues(issues, staged.scope, staged.after);
      const written = await this.store.advanceRows(
        documentId,
        update.seq,
        rowChanges(open.projection, rows),
        issues,
      );
      open.seq = update.seq;
      if (!written) {
        open.projection = storeProjection(this.schema, this.store, documentId);
        writing = false;
      }
    }
    open.issues = writing ? issues : undefined;
  }

  /** Plan ids the updates since `before` applied. */
  private catchUpPlans(open: OpenDocument, before: Frontiers): void {
    const plans = open.plans;
    if (plans === undefined) return;
    const version = encodeVersion(open.doc.oplogVersion());
    const spans = open.doc.findIdSpansBetween(before, open.doc.frontiers()).forward;
    for (const planId of planIdsOf(open.doc, spans)) plans.set(planId, version);
  }

  /** The open document with its issues. */
  async withIssues(documentId: string): Promise<OpenDocument & { issues: DocumentIssue[] }> {
    const open = await this.current(documentId);
    open.issues ??= await this.issuesOf(documentId, open);
    return open as OpenDocument & { issues: DocumentIssue[] };
  }

  /**
   * The document's issues at its seq: those the store keeps with its rows, or (not kept) a check of
   * the whole document, read from the store's rows.
   */
  async issuesOf(documentId: string, open: OpenDocument): Promise<DocumentIssue[]> {
    if (open.issues !== undefined) return open.issues;
    const stored = await this.storedIssues(documentId, open.seq);
    if (stored !== undefined) return stored;
    // A whole check: it lacks every row at first, then holds them all.
    for (;;) {
      const issues = checkDocument(open.projection);
      if (!open.projection.lacking) return issues;
      await this.fill(documentId, open.projection, open.seq);
    }
  }

  /** The issues the store keeps, when they are those of `seq`. */
  private async storedIssues(documentId: string, seq: number): Promise<DocumentIssue[] | undefined> {
    const before = await this.store.rowsSeq(documentId);
    const issues = await this.store.documentIssues(documentId);
    const after = await this.store.rowsSeq(documentId);
    return before === seq && after === seq ? issues : undefined;
  }
}

/**
 * A version as pages tell it: one text for one version, whether read off the loaded document or made
 * from the stored one (Loro encodes a vector in its map's order, which its history may change), so
 * pages read by one run compare equal while the document does not move.
 */
function pageVersion(ends: Map<PeerID, number>): string {
  const peers = [...ends].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));
  return encodeVersion(new VersionVector(new Map(peers)));
}
