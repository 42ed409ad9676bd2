/**
 * The document server's core: documents kept open in memory (bounded), each with its projection, so a
 * push is checked by forking, importing only the update and re-reading only the rows it touched.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { type Logger, silentLogger } from "@tackle/core";
import {
  decodeImportBlobMeta,
  type Frontiers,
  type IdSpan,
  type ImportBlobMetadata,
  LoroDoc,
} from "loro-crdt";
import {
  type CheckScope,
  changeScope,
  checkDocument,
  compareIssues,
  issueKey,
} from "../document/check-document.ts";
import type { ContainerIndex } from "../document/container-index.ts";
import { projectDocument, refreshRows } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import { decodeVersion, encodeVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError, formatIssue } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { type ChangeFacts, stagedCounts } from "./change-log.ts";
import { type ChangedRows, changedRows } from "./changed-rows.ts";
import {
  type DocumentStore,
  type MemberQuery,
  type RowChange,
  type RowRoot,
  StoreConflictError,
} from "./document-store.ts";
import { conflictingTargets, lostUpdates, restoreCommitted } from "./lost-updates.ts";
import { appliedPlans, hostOnlyChanges, issueReason, planIdsOf, unreadableKeys } from "./push-checks.ts";
import type { ConflictReason, PushResult } from "./push-result.ts";
import { allRowChanges, relationOf, rowChanges } from "./row-members.ts";
import {
  assembledEntities,
  type EntityPage,
  firstClaims,
  lookUpRows,
  type RelationPage,
  type RowLookup,
  type RowLookupAnswer,
  totalsOf,
} from "./row-reads.ts";
import { StoreProjection } from "./store-projection.ts";

export {
  type EntityPage,
  type PageCounts,
  type RelationPage,
  type RowLookup,
  type RowLookupAnswer,
  rowLookupLimits,
} from "./row-reads.ts";

export interface DocumentHostOptions {
  readonly store: DocumentStore;
  readonly schema: Schema;
  /** Compact the log into a snapshot after this many updates. Default 100. */
  readonly compactEvery?: number;
  /** ...or once the updates after the snapshot hold this many bytes. Default 1 MiB. */
  readonly compactLogBytes?: number;
  /** ...or once the oldest update after the snapshot is this old (checked on each push). Default 10 min. */
  readonly compactAgeMs?: number;
  /** Documents kept open in memory. Default 64. */
  readonly maxOpenDocuments?: number;
  readonly logger?: Logger;
}

interface OpenDocument {
  doc: LoroDoc;
  /** A replica of `doc` that pushes are imported into first; undefined after a rejection polluted it. */
  shadow: LoroDoc | undefined;
  /** Row of every container seen; shared by the live document and its forks (containers never move). */
  readonly index: ContainerIndex;
  /**
   * The rows the checks of pushes looked up, as entities and relations: read from the store's rows on
   * demand (opening reads none), kept in step with every update after.
   */
  projection: StoreProjection;
  /** The document's issues (whole document), kept in step by each push; undefined until needed. */
  issues: DocumentIssue[] | undefined;
  seq: number;
  snapshotSeq: number;
  /** Bytes of the updates after the snapshot, and when the first of them was seen (undefined: none). */
  logBytes: number;
  logSince: number | undefined;
  tokenHash: string;
  /**
   * Every plan id applied to the document (read off its changes' messages) and the version it took it
   * to; read on first need (reading the history of a large document costs seconds), then kept up.
   */
  plans: Map<string, string> | undefined;
}

/** Rows a document's projection keeps holding between pushes; past this it starts empty again. */
const heldRowsBound = 20_000;

/** A push imported into the fork, with the rows it touched. */
interface Prepared {
  readonly bytes: Uint8Array;
  readonly fork: LoroDoc;
  readonly meta: ImportBlobMetadata;
  readonly spans: IdSpan[];
  readonly planIds: string[];
  /** The changes the server held that the push's base lacked (concurrent with it). */
  readonly concurrent: IdSpan[];
  /** The fork's frontiers with the push imported (before any write `apply_remaining` adds). */
  readonly pushed: Frontiers;
  readonly rows: ChangedRows;
}

/** A push judged: its answer and, when it is to be stored (`undo` set), what is stored with it. */
interface Judged {
  result: PushResult;
  /** What is stored when it is not the push's bytes (the push with what `apply_remaining` put back). */
  bytes?: Uint8Array;
  fork?: LoroDoc;
  undo?: () => void;
  planIds?: string[];
  /** The rows the push changed, as it leaves them (set with `undo`). */
  rows?: RowChange[];
  /** What the change log records of the push (set with `undo`). */
  change?: ChangeFacts;
  /** Those rows as they were. */
  before?: { root: RowRoot; rowId: string; json: unknown }[];
  /** The document's issues after the push. */
  issues?: DocumentIssue[];
}

/** The store's rows are not at the seq the projection reading them is at (another server moved them). */
class StaleRowsError extends Error {
  constructor(documentId: string, seq: number, rowsSeq: number | undefined) {
    super(`the rows of ${documentId} hold through ${rowsSeq ?? "nothing"}, not ${seq}`);
    this.name = "StaleRowsError";
  }
}

/** How a push is made: by a host credential (it may set host-only fields), and whether to apply past lost writes. */
export interface PushOptions {
  readonly actor?: string;
  /** The caller holds a host credential: it may set host-only fields. */
  readonly host?: boolean;
  /** Store the update even when some of its writes no longer apply (they are reported, the rest applies). */
  readonly applyRemaining?: boolean;
}

/** What the server knows of a plan id. */
export type PlanState =
  | { readonly state: "applied"; readonly version: string }
  | { readonly state: "unknown"; readonly version: string };

export type Authorization = "ok" | "missing" | "forbidden" | "not_found";

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export class DocumentHost {
  readonly schema: Schema;
  private readonly store: DocumentStore;
  private readonly compactEvery: number;
  private readonly compactLogBytes: number;
  private readonly compactAgeMs: number;
  private readonly maxOpen: number;
  private readonly logger: Logger;
  private readonly open = new Map<string, OpenDocument>();
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private watching: Promise<void> | undefined;

  constructor(options: DocumentHostOptions) {
    this.store = options.store;
    this.schema = options.schema;
    this.compactEvery = options.compactEvery ?? 100;
    this.compactLogBytes = options.compactLogBytes ?? 1024 * 1024;
    this.compactAgeMs = options.compactAgeMs ?? 10 * 60_000;
    this.maxOpen = options.maxOpenDocuments ?? 64;
    this.logger = options.logger ?? silentLogger;
  }

  /** Creates a document (empty, or from a snapshot that must project cleanly). False when it exists. */
  async create(documentId: string, token: string, snapshot?: Uint8Array): Promise<boolean> {
    const doc = new LoroDoc();
    if (snapshot !== undefined) {
      try {
        doc.import(snapshot);
      } catch (error) {
        throw new DocScriptError(
          "invalid_snapshot",
          `the snapshot does not import: ${describeError(error)}`,
          [],
          error,
        );
      }
      // Checked from its ops before any row is read (a too-deep value breaks Loro's reader).
      const unreadable = unreadableKeys(doc, doc.findIdSpansBetween([], doc.frontiers()).forward);
      if (unreadable.length > 0) {
        throw new DocScriptError(
          "invalid_snapshot",
          `the snapshot cannot be stored: ${unreadable.join("; ")}`,
        );
      }
    }
    const projection = projectDocument(doc, this.schema);
    const issues = checkDocument(projection);
    if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
    return this.store.createDocument({
      documentId,
      tokenHash: hashToken(token),
      snapshot: doc.export({ mode: "snapshot" }),
      rows: allRowChanges(projection),
      issues: [],
    });
  }

  async authorize(documentId: string, token: string | undefined): Promise<Authorization> {
    const stored = this.open.get(documentId)?.tokenHash ?? (await this.store.tokenHash(documentId));
    if (stored === undefined) return "not_found";
    if (token === undefined || token === "") return "missing";
    const given = Buffer.from(hashToken(token), "hex");
    return timingSafeEqual(given, Buffer.from(stored, "hex")) ? "ok" : "forbidden";
  }

  /** The whole document and its version. */
  async snapshot(documentId: string): Promise<{ bytes: Uint8Array; version: string }> {
    return this.serialized(documentId, async () => {
      const open = await this.current(documentId);
      return {
        bytes: open.doc.export({ mode: "snapshot" }),
        version: encodeVersion(open.doc.oplogVersion()),
      };
    });
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
    const signal = options.signal;
    const from = decodeVersion(since);
    const deadline = performance.now() + waitMs;
    if (waitMs > 0) await this.watchAppends();
    for (;;) {
      // Listen before reading, so a push stored between the read and the wait still wakes it.
      const next = waitMs > 0 ? this.nextAppend(documentId) : undefined;
      const answer = await this.serialized(documentId, async () => {
        const open = await this.current(documentId);
        const version = open.doc.oplogVersion();
        const comparison = version.compare(from);
        return {
          bytes: open.doc.export({ mode: "update", from }),
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

  /** Resolves on the next append to the document (through this server or an announcing store). */
  private nextAppend(documentId: string): { appended: Promise<void>; cancel: () => void } {
    let wake: () => void = () => {};
    const appended = new Promise<void>((resolve) => {
      wake = resolve;
    });
    let waiting = this.waiters.get(documentId);
    if (waiting === undefined) {
      waiting = new Set();
      this.waiters.set(documentId, waiting);
    }
    waiting.add(wake);
    return {
      appended,
      cancel: () => {
        const set = this.waiters.get(documentId);
        set?.delete(wake);
        if (set?.size === 0) this.waiters.delete(documentId);
      },
    };
  }

  private wake(documentId: string): void {
    for (const wake of this.waiters.get(documentId) ?? []) wake();
  }

  /** Starts listening to the store's append announcements once (a failure is logged and retried on next need). */
  private async watchAppends(): Promise<void> {
    if (this.store.watchAppends === undefined) return;
    this.watching ??= this.store
      .watchAppends((documentId) => this.wake(documentId))
      .then(
        () => undefined,
        (error: unknown) => {
          this.logger.warn("docscript: cannot listen for other servers' pushes", {
            error: describeError(error),
          });
          this.watching = undefined;
        },
      );
    await this.watching;
  }

  /** Whether a plan id was applied to the document (after every push queued before this call). */
  async planState(documentId: string, planId: string): Promise<PlanState> {
    return this.serialized(documentId, async () => {
      const open = await this.current(documentId);
      const applied = plansOf(open).get(planId);
      const version = encodeVersion(open.doc.oplogVersion());
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
    for (let attempt = 0; ; attempt++) {
      const open = await this.withIssues(documentId);
      open.shadow ??= await this.replicaOf(documentId, open);
      const prepared = this.prepare(open, bytes);
      if ("result" in prepared) return prepared.result;
      let outcome: Judged;
      try {
        outcome = await this.judged(documentId, open, prepared, pushOptions);
      } catch (error) {
        // The store's rows moved under the projection (another server wrote them): read them afresh.
        if (error instanceof StaleRowsError && attempt < 5) {
          open.projection = new StoreProjection(this.schema);
          continue;
        }
        throw error;
      }
      if (outcome.undo === undefined) return outcome.result;
      const status = outcome.result.status === "conflicted" ? "conflicted" : "committed";
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
        });
      } catch (error) {
        outcome.undo();
        // Another server appended first: catch up and check again against the merged document.
        if (StoreConflictError.isInstance(error) && attempt < 5) continue;
        throw error;
      }
      // The live document takes the same update the fork took: the two are replicas again.
      open.doc.import(stored);
      open.shadow = outcome.fork;
      open.seq = seq;
      if (outcome.issues !== undefined) open.issues = outcome.issues;
      // The rows a document's pushes looked up stay held for the next push, up to a bound.
      if (!open.projection.holdsEverything && open.projection.rowCount > heldRowsBound)
        open.projection = new StoreProjection(this.schema);
      this.wake(documentId);
      const version = encodeVersion(open.doc.oplogVersion());
      for (const planId of outcome.planIds ?? []) plansOf(open).set(planId, version);
      open.logBytes += stored.length;
      open.logSince ??= Date.now();
      if (this.logDue(open)) this.compactLater(documentId);
      return outcome.result;
    }
  }

  /** Waits for queued work (a compaction that runs after its push answered) and drops open documents. */
  async close(): Promise<void> {
    while (this.queues.size > 0) await Promise.all([...this.queues.values()]);
    this.open.clear();
  }

  /** Drops every open document (they reload from the store on next use). */
  forget(): void {
    this.open.clear();
  }

  /**
   * Imports the update into the document's fork (a replica kept in step with the live document, made
   * anew only after a rejected push polluted it) and finds the rows it touched; answers at once a push
   * that is not an update, does not import, or was applied before.
   */
  private prepare(open: OpenDocument, bytes: Uint8Array): Prepared | { result: PushResult } {
    const reject = (reasons: string[], issues: DocumentIssue[] = []): { result: PushResult } => ({
      result: { status: "rejected", reasons, issues },
    });
    let meta: ReturnType<typeof decodeImportBlobMeta>;
    try {
      meta = decodeImportBlobMeta(bytes, true);
    } catch (error) {
      return reject([`the bytes are not a Loro update: ${describeError(error)}`]);
    }
    if (meta.mode !== "update" && meta.mode !== "outdated-update") {
      return reject([`a push carries an update, not a ${meta.mode}`]);
    }
    const fork = open.shadow ?? open.doc.fork();
    // Until this push is stored, the fork is not a replica of the live document.
    open.shadow = undefined;
    const before = fork.frontiers();
    try {
      const status = fork.import(bytes);
      if (status.pending !== null && status.pending !== undefined && status.pending.size > 0) {
        return reject(["the update depends on changes this server does not have; pull and rebase first"]);
      }
    } catch (error) {
      return reject([`the update does not import: ${describeError(error)}`]);
    }
    const after = fork.frontiers();
    if (fork.cmpFrontiers(before, after) === 0) {
      // Already stored (a retried push): store nothing and say so.
      open.shadow = fork;
      const version = encodeVersion(open.doc.oplogVersion());
      return { result: { status: "committed", version, duplicate: true } };
    }
    const spans = fork.findIdSpansBetween(before, after).forward;
    const unreadable = unreadableKeys(fork, spans);
    if (unreadable.length > 0) return reject(unreadable);
    const planIds = planIdsOf(fork, spans);
    const applied = planIds.length === 0 ? undefined : planIds.find((planId) => plansOf(open).has(planId));
    if (applied !== undefined) {
      // The same plan, applied before under other bytes (a re-derived plan): applying it again would
      // apply its edit twice.
      return {
        result: { status: "committed", version: encodeVersion(open.doc.oplogVersion()), duplicate: true },
      };
    }
    // The changes the server held that the update's base did not: what it may lose (ADR 0475).
    const concurrent = fork.findIdSpansBetween(meta.startFrontiers, before).forward;
    return {
      bytes,
      fork,
      meta,
      spans,
      planIds,
      concurrent,
      pushed: after,
      rows: changedRows(fork, before, after, open.index),
    };
  }

  /**
   * A replica of the open document for pushes to be checked in: imported from the stored snapshot and
   * log (Loro imports a snapshot lazily: seconds at 1M entities), not forked from the live document
   * (a fork exports the whole state first: 31 s at 1M). A fork when the store no longer holds that
   * version (compacted past it) or the import does not come out at the live document's version.
   */
  private async replicaOf(documentId: string, open: OpenDocument): Promise<LoroDoc> {
    const stored = await this.store.load(documentId);
    if (stored !== undefined && stored.snapshotSeq <= open.seq) {
      const replica = LoroDoc.fromSnapshot(stored.snapshot);
      const updates = stored.updates.filter((update) => update.seq <= open.seq);
      if (updates.length > 0) replica.importBatch(updates.map((update) => update.bytes));
      if (replica.cmpFrontiers(replica.frontiers(), open.doc.frontiers()) === 0) return replica;
    }
    return open.doc.fork();
  }

  /**
   * Judges a prepared push against the projection, reading from the store what the checks looked up
   * and the projection did not hold, and judging again, until a judgement lacked nothing.
   */
  private async judged(
    documentId: string,
    open: OpenDocument & { issues: DocumentIssue[] },
    prepared: Prepared,
    options: PushOptions,
  ): Promise<Judged> {
    for (;;) {
      const outcome = this.judge(open, prepared, options);
      if (!open.projection.lacking) return outcome;
      outcome.undo?.();
      await this.fill(documentId, open.projection, open.seq);
    }
  }

  /** Reads what the projection lacked from the store's rows, which must hold through `seq`. */
  private async fill(documentId: string, projection: StoreProjection, seq: number): Promise<void> {
    await projection.fill(this.store, documentId);
    const rowsSeq = await this.store.rowsSeq(documentId);
    if (rowsSeq !== seq) throw new StaleRowsError(documentId, seq, rowsSeq);
  }

  /**
   * Stages the rows the prepared push touched in the projection and classifies the result. `undo` is
   * set when the push is to be stored; it puts the projection back. When the projection lacked a row
   * a check looked up, the answer is to be thrown away (the caller fills it and judges again).
   */
  private judge(
    open: OpenDocument & { issues: DocumentIssue[] },
    prepared: Prepared,
    options: PushOptions,
  ): Judged {
    const reject = (reasons: string[], issues: DocumentIssue[] = []): { result: PushResult } => ({
      result: { status: "rejected", reasons, issues },
    });
    const { fork, meta, spans } = prepared;
    const lost = lostUpdates(fork, spans, prepared.concurrent, open.index);
    const staged = this.stage(open.projection, fork, prepared.rows, open.index);
    if (staged.foreign.length > 0) {
      staged.undo();
      return reject(staged.foreign);
    }
    if (options.host !== true) {
      const hostOnly = hostOnlyChanges(this.schema, staged.previous, open.projection);
      if (hostOnly.length > 0) {
        staged.undo();
        return reject(
          hostOnly.map((path) => `${path} is a host-only field; only a host credential may set it`),
          [],
        );
      }
    }
    const conflicted = (reasons: ConflictReason[], issues: DocumentIssue[], refused?: string): Judged => ({
      result: {
        status: "conflicted",
        applied: false,
        version: encodeVersion(open.doc.oplogVersion()),
        reasons,
        issues,
        ...(refused === undefined ? {} : { refused }),
      },
    });
    if (lost.length > 0 && options.applyRemaining !== true) {
      // Some writes would lose a committed change: nothing of the update lands (ADR 0475).
      staged.undo();
      return conflicted(lost, staged.added);
    }
    if (staged.added.length === 0 && lost.length === 0)
      return this.toStore(open, prepared, options, staged, { status: "committed", version: "" });
    // The merged document breaks a constraint: the update's own fault, or the merge's?
    if (open.projection.lacking) {
      // Judged again once the projection holds what it lacked; the slow path below only then.
      staged.undo();
      return reject(["the projection lacked rows"]);
    }
    // The update was made on everything this server had when it depends on the server's current heads.
    const order = fork.cmpFrontiers(open.doc.frontiers(), meta.startFrontiers);
    const sawEverything = order === 0 || order === -1;
    const ownIssues =
      staged.added.length === 0
        ? []
        : sawEverything
          ? staged.added
          : this.issuesOnItsOwn(open.doc, meta.startFrontiers, prepared.bytes);
    if (ownIssues.length > 0) {
      staged.undo();
      return reject(
        ["the update breaks the schema on its own", ...ownIssues.slice(0, 10).map(formatIssue)],
        ownIssues,
      );
    }
    const reasons = [...lost, ...staged.added.map(issueReason)];
    staged.undo();
    if (options.applyRemaining !== true) return conflicted(reasons, staged.added);
    return this.remaining(open, prepared, options, lost, conflicted);
  }

  /**
   * `apply_remaining`: the push without its writes that lose a committed change, or a refusal. Writes
   * into rows deleted since apply to nothing a reader sees; a field both changed gets the committed
   * value back in a change of the server's own; a delete of a row changed since cannot be left out
   * and refuses, as does a remainder that would leave the document invalid (ADR 0475).
   */
  private remaining(
    open: OpenDocument & { issues: DocumentIssue[] },
    prepared: Prepared,
    options: PushOptions,
    lost: ConflictReason[],
    conflicted: (reasons: ConflictReason[], issues: DocumentIssue[], refused?: string) => Judged,
  ): Judged {
    const { fork } = prepared;
    if (lost.some((reason) => reason.reason === "entity_changed" || reason.reason === "relation_changed"))
      return conflicted(
        lost,
        [],
        "apply_remaining refused: the plan deletes or creates what another client changed, which cannot be left out of it; take a fresh snapshot and run a new script",
      );
    const targets = conflictingTargets(fork, prepared.spans, prepared.concurrent, open.index);
    if (!restoreCommitted(fork, open.doc, targets))
      return conflicted(
        lost,
        [],
        "apply_remaining refused: a conflicting write replaced a record another client changed; take a fresh snapshot and run a new script",
      );
    fork.commit({
      message: JSON.stringify({ remainingOf: prepared.planIds }),
      origin: "docscript-apply-remaining",
    });
    const staged = this.stage(open.projection, fork, prepared.rows, open.index);
    if (open.projection.lacking) {
      staged.undo();
      return { result: { status: "rejected", reasons: ["the projection lacked rows"], issues: [] } };
    }
    if (staged.added.length > 0) {
      staged.undo();
      return conflicted(
        [...lost, ...staged.added.map(issueReason)],
        staged.added,
        "apply_remaining refused: what remains of the plan would leave the document invalid; take a fresh snapshot and run a new script",
      );
    }
    const bytes = fork.export({ mode: "update", from: open.doc.oplogVersion() });
    return {
      ...this.toStore(open, prepared, options, staged, {
        status: "conflicted",
        applied: true,
        version: "",
        reasons: lost,
        issues: [],
      }),
      bytes,
    };
  }

  /** A judged push to be stored: its answer at the fork's version, with the rows and facts stored with it. */
  private toStore(
    open: OpenDocument & { issues: DocumentIssue[] },
    prepared: Prepared,
    options: PushOptions,
    staged: ReturnType<DocumentHost["stage"]>,
    result: Exclude<PushResult, { status: "rejected" }>,
  ): Judged {
    const { fork, spans, planIds } = prepared;
    return {
      result: { ...result, version: encodeVersion(fork.oplogVersion()) },
      fork,
      undo: staged.undo,
      planIds,
      rows: rowChanges(open.projection, staged.rows),
      before: staged.before,
      issues: nextIssues(open.issues, staged.scope, staged.after),
      // What the change log records if this is stored: counted off the rows just staged.
      change: {
        credential: options.host === true ? "host" : "document",
        peers: [...new Set(spans.map((span) => String(span.peer)))],
        planIds,
        ...stagedCounts(open.projection, staged.previous, staged.previousRelations),
      },
    };
  }

  /**
   * Re-reads the rows a change touched into `projection` (in place) and returns the issues the change
   * adds within its reach, with an `undo` that restores the rows as they were.
   */
  private stage(
    projection: Projection,
    doc: LoroDoc,
    rows: ChangedRows,
    index: ContainerIndex,
  ): {
    added: DocumentIssue[];
    foreign: string[];
    undo: () => void;
    /** The rows as they were before the change. */
    previous: ReadonlyMap<string, unknown>;
    previousRelations: ReadonlyMap<string, unknown>;
    /** The rows the change touched. */
    rows: { readonly entities: ReadonlySet<string>; readonly relations: ReadonlySet<string> };
    /** Those rows as they were. */
    before: { root: RowRoot; rowId: string; json: unknown }[];
    /** What the change reaches, and every issue there after it. */
    scope: CheckScope;
    after: DocumentIssue[];
  } {
    const foreign = [...rows.foreignRoots].map(
      (root) => `the update writes root container "${root}", which the mapping does not know`,
    );
    const beforeScope = changeScope(projection, rows);
    const before = new Set(checkDocument(projection, beforeScope).map(issueKey));
    const previousRows = new Map([...rows.entities].map((rowId) => [rowId, projection.rowJson(rowId)]));
    const previousRelations = new Map(
      [...rows.relations].map((relationId) => [relationId, projection.relationJson(relationId)]),
    );
    refreshRows(projection, doc, rows, index);
    const afterScope = changeScope(projection, rows);
    const scope: CheckScope = {
      entityIds: new Set([...beforeScope.entityIds, ...afterScope.entityIds]),
      relationIds: new Set([...beforeScope.relationIds, ...afterScope.relationIds]),
    };
    const after = checkDocument(projection, scope);
    const added = after.filter((issue) => !before.has(issueKey(issue)));
    const undo = () => {
      for (const [rowId, json] of previousRows) projection.setRow(rowId, json);
      for (const [relationId, json] of previousRelations) projection.setRelationRow(relationId, json);
    };
    return {
      added,
      foreign,
      undo,
      previous: previousRows,
      previousRelations,
      rows,
      before: [
        ...[...previousRows].map(([rowId, json]) => ({ root: ENTITIES as RowRoot, rowId, json })),
        ...[...previousRelations].map(([rowId, json]) => ({ root: RELATIONS as RowRoot, rowId, json })),
      ],
      scope,
      after,
    };
  }

  /** The issues the update adds to the version it was made on (the slow path: a full read of that version). */
  private issuesOnItsOwn(doc: LoroDoc, startFrontiers: Frontiers, bytes: Uint8Array): DocumentIssue[] {
    const base = doc.forkAt(startFrontiers);
    const index: ContainerIndex = new Map();
    const projection = projectDocument(base, this.schema, index);
    const from = base.frontiers();
    base.import(bytes);
    return this.stage(projection, base, changedRows(base, from, base.frontiers(), index), index).added;
  }

  /** Whether the log after the snapshot is long, large or old enough to be compacted (ADR 0477). */
  private logDue(open: OpenDocument): boolean {
    if (open.seq === open.snapshotSeq) return false;
    return (
      open.seq - open.snapshotSeq >= this.compactEvery ||
      open.logBytes >= this.compactLogBytes ||
      (open.logSince !== undefined && Date.now() - open.logSince >= this.compactAgeMs)
    );
  }

  private compactLater(documentId: string): void {
    void this.serialized(documentId, async () => {
      const open = this.open.get(documentId);
      if (open === undefined) return;
      const snapshot = open.doc.export({ mode: "snapshot" });
      const through = open.seq;
      await this.store.compact(documentId, snapshot, through);
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
   * The open document, loaded or caught up with updates other servers appended, with the store's rows
   * holding through its seq: rows another server left behind (an update appended without them) are
   * written here, from the updates themselves, before anything reads them.
   */
  private async current(documentId: string): Promise<OpenDocument> {
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
      open.doc.importBatch(withRows.map((update) => update.bytes));
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

  /** Opens a document: imports its snapshot and log, reading nothing out of them. */
  private async load(documentId: string): Promise<OpenDocument> {
    const stored = await this.store.load(documentId);
    if (stored === undefined) throw new DocScriptError("document_not_found", `no document ${documentId}`);
    const rowsSeq = await this.store.rowsSeq(documentId);
    const doc = LoroDoc.fromSnapshot(stored.snapshot);
    // Rows kept through a seq the log still holds: the updates after it are written to the rows one
    // by one below. Otherwise (a document stored before rows were kept, or rows behind a compaction)
    // the document is read whole once (rows read plainly: a deep read with container ids costs ~5×
    // more) and its rows replaced.
    const incremental = rowsSeq !== undefined && rowsSeq >= stored.snapshotSeq;
    const withRows = stored.updates.filter((update) => incremental && update.seq <= rowsSeq);
    if (withRows.length > 0) doc.importBatch(withRows.map((update) => update.bytes));
    const without = stored.updates.slice(withRows.length);
    // Nothing is read out of the document: rows come from the store's projection when a push or a
    // page needs them. The container index fills as pushes touch rows, each container found through
    // the op that created it.
    const open: OpenDocument = {
      doc,
      shadow: undefined,
      index: new Map(),
      projection: new StoreProjection(this.schema),
      issues: undefined,
      seq: withRows.at(-1)?.seq ?? stored.snapshotSeq,
      snapshotSeq: stored.snapshotSeq,
      logBytes: stored.updates.reduce((sum, update) => sum + update.bytes.length, 0),
      logSince: stored.updates.length === 0 ? undefined : Date.now(),
      tokenHash: stored.tokenHash,
      plans: undefined,
    };
    this.open.set(documentId, open);
    while (this.open.size > this.maxOpen) {
      const oldest = this.open.keys().next().value as string;
      this.open.delete(oldest);
    }
    if (incremental) {
      if (without.length > 0) await this.writeRowsOf(documentId, open, without);
    } else {
      if (without.length > 0) doc.importBatch(without.map((update) => update.bytes));
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
      let staged = this.stage(open.projection, open.doc, rows, open.index);
      try {
        while (open.projection.lacking) {
          staged.undo();
          await this.fill(documentId, open.projection, open.seq);
          staged = this.stage(open.projection, open.doc, rows, open.index);
        }
      } catch (error) {
        if (!(error instanceof StaleRowsError)) throw error;
        // Another server is writing these rows: leave it to them and hold nothing stale.
        open.projection = new StoreProjection(this.schema);
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
        open.projection = new StoreProjection(this.schema);
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
  private async withIssues(documentId: string): Promise<OpenDocument & { issues: DocumentIssue[] }> {
    const open = await this.current(documentId);
    open.issues ??= await this.issuesOf(documentId, open);
    return open as OpenDocument & { issues: DocumentIssue[] };
  }

  /**
   * The document's issues at its seq: those the store keeps with its rows, or (not kept) a check of
   * the whole document, read from the store's rows.
   */
  private async issuesOf(documentId: string, open: OpenDocument): Promise<DocumentIssue[]> {
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

  /**
   * A page of entities in id order, read from the store's rows (never the Loro document): by kinds
   * and/or ids, after a cursor; a variant with its base applied. With the document's version, its
   * issues and how many entities and relations it has.
   */
  async entityPage(
    documentId: string,
    query: { kinds?: readonly string[]; ids?: readonly string[]; after?: string; limit: number },
  ): Promise<EntityPage> {
    return this.serialized(documentId, async () => {
      const open = await this.current(documentId);
      const found = await this.store.readMembers(documentId, {
        type: "entity",
        kinds: query.kinds,
        ids: query.ids,
        after: query.after,
        limit: query.limit,
      });
      const entities = await assembledEntities(this.store, this.schema, documentId, firstClaims(found));
      open.issues ??= await this.issuesOf(documentId, open);
      return {
        version: encodeVersion(open.doc.oplogVersion()),
        ...(await totalsOf(this.store, documentId)),
        entities,
        issues: open.issues,
      };
    });
  }

  /** A page of relations in id order, read from the store's rows: by kinds, ids, an endpoint, after a cursor. */
  async relationPage(
    documentId: string,
    query: Omit<MemberQuery, "type" | "variantOf" | "identity">,
  ): Promise<RelationPage> {
    return this.serialized(documentId, async () => {
      const open = await this.current(documentId);
      const found = await this.store.readMembers(documentId, { ...query, type: "relation" });
      return {
        version: encodeVersion(open.doc.oplogVersion()),
        ...(await totalsOf(this.store, documentId)),
        relations: firstClaims(found).map(relationOf),
      };
    });
  }

  /**
   * Stored rows by id, or by the members a query finds, at the document's current version (its rows
   * caught up first), for a reader that keeps a projection of only what it looked up (ADR 0466).
   */
  async rowLookup(documentId: string, lookups: readonly RowLookup[]): Promise<RowLookupAnswer> {
    return this.serialized(documentId, async () => {
      const open = await this.current(documentId);
      const results = await lookUpRows(this.store, documentId, lookups);
      return {
        version: encodeVersion(open.doc.oplogVersion()),
        counts: (await totalsOf(this.store, documentId)).counts,
        results,
      };
    });
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

/**
 * The document's issues after a change: those outside what it reached, kept, and every issue within
 * it, checked again (deduplicated, in the check's order).
 */
function nextIssues(
  issues: readonly DocumentIssue[],
  scope: CheckScope,
  within: readonly DocumentIssue[],
): DocumentIssue[] {
  const entityIds = new Set(scope.entityIds);
  const relationIds = new Set(scope.relationIds);
  const kept = issues.filter(
    (issue) =>
      !(issue.entityId !== undefined && entityIds.has(issue.entityId)) &&
      !(issue.relationId !== undefined && relationIds.has(issue.relationId)),
  );
  const seen = new Set<string>();
  return [...kept, ...within]
    .filter((issue) => {
      const key = issueKey(issue);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort(compareIssues);
}

/** The document's plan index, read off its history on first need. */
function plansOf(open: OpenDocument): Map<string, string> {
  open.plans ??= appliedPlans(open.doc);
  return open.plans;
}

/** Loro throws values that are not Errors; keep whatever they say. */
function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
