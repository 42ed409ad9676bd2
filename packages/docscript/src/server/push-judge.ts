/**
 * How the document server judges a push (ADR 0475): imported into the document's fork, the rows it
 * touched staged in the projection and checked, committed changes it would lose found, and the
 * answer made: rejected, conflicted, `apply_remaining`'s remainder, or to be stored.
 */
import {
  decodeImportBlobMeta,
  type Frontiers,
  type IdSpan,
  type ImportBlobMetadata,
  type LoroDoc,
} from "loro-crdt";
import { readyForImportInto } from "../document/ready-for-imports.ts";
import { encodeVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import { formatIssue } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { type ChangeFacts, fieldCounts, stagedCounts } from "./change-log.ts";
import { type ChangedRows, rowsOfSpans } from "./changed-rows.ts";
import type { RowChange, RowRoot } from "./document-store.ts";
import { conflictingTargets, lostUpdates, restoreCommitted } from "./lost-updates.ts";
import { describeError, type OpenDocument, type PushOptions } from "./open-document.ts";
import { changesIn, hostOnlyChanges, issueReason, planIdsOf, unreadableKeys } from "./push-checks.ts";
import type { ConflictReason, PushResult } from "./push-result.ts";
import { type StagedParts, takeStaged } from "./push-stage.ts";
import {
  issuesOnItsOwn,
  type KnownRows,
  nextIssues,
  RowReads,
  type Staged,
  scopeLacking,
  stageChange,
} from "./push-staging.ts";
import { rowChanges } from "./row-members.ts";

export /** A push imported into the fork, with the rows it touched. */
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
  /** Those rows as the fork holds them with the push, read once across the check's rounds. */
  readonly reads: RowReads;
  /** The staged parts' bytes, when the fork is detached (ADR 0517): the live document imports them. */
  readonly held?: readonly Uint8Array[];
}

export /** A push judged: its answer and, when it is to be stored (`undo` set), what is stored with it. */
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

/**
 * A push's metadata, decoded once for the checks before its import (`partsFitPush`, `preparePush`),
 * or its answer when it is not an update.
 */
export function decodePush(bytes: Uint8Array): { meta: ImportBlobMetadata } | { result: PushResult } {
  const reject = (reason: string): { result: PushResult } => ({
    result: { status: "rejected", reasons: [reason], issues: [] },
  });
  let meta: ImportBlobMetadata;
  try {
    meta = decodeImportBlobMeta(bytes, true);
  } catch (error) {
    return reject(`the bytes are not a Loro update: ${describeError(error)}`);
  }
  if (meta.mode !== "update" && meta.mode !== "outdated-update")
    return reject(`a push carries an update, not a ${meta.mode}`);
  return { meta };
}

/**
 * Imports the update into the document's fork (a replica kept in step with the live document, made
 * anew only after a rejected push polluted it) and finds the rows it touched; answers at once a push
 * that is not an update, does not import, or was applied before (its bytes; a plan applied before
 * under other bytes is found in the plan index by the caller).
 */
export function preparePush(
  open: OpenDocument,
  bytes: Uint8Array,
  meta: ImportBlobMetadata,
): Prepared | { result: PushResult } {
  const reject = (reasons: string[], issues: DocumentIssue[] = []): { result: PushResult } => ({
    result: { status: "rejected", reasons, issues },
  });
  const fork = open.shadow ?? open.doc.fork();
  // Until this push is stored, the fork is not a replica of the live document.
  open.shadow = undefined;
  // Parts of this push staged in the shadow (ADR 0508; the caller dropped parts of any other update):
  // the push is judged from the live document's frontiers, as if none had come before it.
  const parts = takeStaged(fork);
  const imported = fork.oplogFrontiers();
  const before = parts?.from ?? imported;
  try {
    readyForImportInto(fork, bytes, meta);
    const status = fork.import(bytes);
    if (status.pending !== null && status.pending !== undefined && status.pending.size > 0) {
      return reject(["the update depends on changes this server does not have; pull and rebase first"]);
    }
  } catch (error) {
    return reject([`the update does not import: ${describeError(error)}`]);
  }
  const after = fork.oplogFrontiers();
  if (fork.cmpFrontiers(before, after) === 0) {
    // Already stored (a retried push): store nothing and say so.
    if (!fork.isDetached()) open.shadow = fork;
    const version = encodeVersion(open.doc.oplogVersion());
    return { result: { status: "committed", version, duplicate: true } };
  }
  const spans = fork.findIdSpansBetween(before, after).forward;
  // The changes the server held that the update's base did not: what it may lose (ADR 0475).
  const concurrent = fork.findIdSpansBetween(meta.startFrontiers, before).forward;
  // Parts held detached bring every op of the push (its tail staged too, ADR 0517): each was checked,
  // and its rows and plan ids found, as it came; its changes are not read again.
  const detached = fork.isDetached();
  // A detached replica holds the push's ops, not their state (ADR 0517): a push it cannot judge from
  // what its parts read is judged in a replica made for it, as any push.
  const asAnyPush = () => {
    open.shadow = undefined;
    return preparePush(open, bytes, meta);
  };
  if (detached && (parts === undefined || fork.cmpFrontiers(imported, after) !== 0)) return asAnyPush();
  const checked = detached && parts !== undefined ? stagedChecks(parts) : checksOf(fork, spans, open, parts);
  if ("reasons" in checked) return reject(checked.reasons);
  const { planIds, rows } = checked;
  const known = parts === undefined ? undefined : readSince(fork, parts, imported, open);
  if (detached && !judgedDetached(rows, concurrent, known)) return asAnyPush();
  return {
    bytes,
    fork,
    meta,
    spans,
    planIds,
    concurrent,
    pushed: after,
    rows,
    reads: new RowReads(fork, known),
    ...(fork.isDetached() && parts?.held !== undefined ? { held: parts.held } : {}),
  };
}

/** The push's changes read once (a 33,000-op push: ~0.2 s a read): what no row can hold, its plan ids and rows. */
function checksOf(
  fork: LoroDoc,
  spans: readonly IdSpan[],
  open: OpenDocument,
  parts: StagedParts | undefined,
): { reasons: string[] } | { planIds: string[]; rows: ChangedRows } {
  const changes = changesIn(fork, spans);
  // The maps the staged parts' index lookups placed are not walked again (ADR 0514).
  const reasons = unreadableKeys(fork, spans, changes, parts?.depths);
  if (reasons.length > 0) return { reasons };
  // Whether one was applied before (under other bytes) is the caller's to ask the plan index.
  return { planIds: planIdsOf(fork, spans, changes), rows: rowsOfSpans(fork, spans, open.index, changes) };
}

/** What the parts held detached found of their ops as they came: field values alone, in these rows. */
function stagedChecks(parts: StagedParts): { planIds: string[]; rows: ChangedRows } {
  return {
    planIds: [...parts.planIds],
    rows: {
      entities: new Set(parts.sets.entities.keys()),
      relations: new Set(parts.sets.relations.keys()),
      foreignRoots: new Set(),
    },
  };
}

/**
 * Whether a push in a detached replica can be judged there (ADR 0517): made on everything the server
 * holds, and every row it touched read before it (patched from its stored JSON by the staged parts).
 */
function judgedDetached(rows: ChangedRows, concurrent: readonly IdSpan[], known: KnownRows | undefined) {
  if (known === undefined || concurrent.length > 0 || rows.foreignRoots.size > 0) return false;
  for (const rowId of rows.entities) if (!known.entities.has(rowId)) return false;
  for (const rowId of rows.relations) if (!known.relations.has(rowId)) return false;
  return true;
}

/**
 * The rows the staged parts read that no op after them touched: as the fork holds them with the push,
 * and of those, the ones patched from their stored JSON (their maps the store's, ADR 0514).
 */
function readSince(fork: LoroDoc, parts: StagedParts, imported: Frontiers, open: OpenDocument): KnownRows {
  const touched = rowsOfSpans(
    fork,
    fork.findIdSpansBetween(imported, fork.oplogFrontiers()).forward,
    open.index,
  );
  const entities = new Map(parts.entities);
  const relations = new Map(parts.relations);
  for (const rowId of touched.entities) entities.delete(rowId);
  for (const rowId of touched.relations) relations.delete(rowId);
  const kept = {
    entities: new Set([...parts.kept.entities].filter((rowId) => entities.has(rowId))),
    relations: new Set([...parts.kept.relations].filter((rowId) => relations.has(rowId))),
  };
  // A verdict holds only for the very row values it was told of (a row touched since is read anew).
  return { entities, relations, kept, verdicts: parts.verdicts, shapes: parts.shapes };
}

/** Fills made at most before a push is judged (its check's reach, a level a fill); past them it is judged and filled. */
const maxLookAheads = 4;

/**
 * Judges a prepared push against the projection: what its check looks up first (the rows it touched
 * as they were, the check's reach) read from the store before it is judged (`fill`), then, should the
 * check look up more the projection does not hold, read too and the push judged again, until a
 * judgement lacked nothing; `judgedIn` is told how many rounds and fills that took.
 */
export async function judgeFilled(
  schema: Schema,
  open: OpenDocument & { issues: DocumentIssue[] },
  prepared: Prepared,
  options: PushOptions,
  store: { fill: () => Promise<void>; judgedIn: (rounds: number, fills: number) => void },
): Promise<Judged> {
  // What its check looks up first, read before it is judged: a judgement that lacked rows is thrown
  // away with its check's work (two such rounds for a shift of 33,000 markers at 100k entities).
  let fills = 0;
  for (; fills < maxLookAheads && scopeLacking(open.projection, prepared.rows, prepared.reads); fills++)
    await store.fill();
  for (let rounds = 1; ; rounds++) {
    const outcome = judgePush(schema, open, prepared, options);
    if (!open.projection.lacking) {
      store.judgedIn(rounds, fills);
      return outcome;
    }
    outcome.undo?.();
    await store.fill();
    fills++;
  }
}

/**
 * Stages the rows the prepared push touched in the projection and classifies the result. `undo` is
 * set when the push is to be stored; it puts the projection back. When the projection lacked a row
 * a check looked up, the answer is to be thrown away (the caller fills it and judges again).
 */
export function judgePush(
  schema: Schema,
  open: OpenDocument & { issues: DocumentIssue[] },
  prepared: Prepared,
  options: PushOptions,
): Judged {
  const reject = (reasons: string[], issues: DocumentIssue[] = []): { result: PushResult } => ({
    result: { status: "rejected", reasons, issues },
  });
  const { fork, meta, spans } = prepared;
  const lost = lostUpdates(fork, spans, prepared.concurrent, open.index);
  const staged = stageChange(open.projection, fork, prepared.rows, prepared.reads);
  if (open.projection.lacking) {
    // Judged again once the projection holds what the checks looked up.
    staged.undo();
    return reject(["the projection lacked rows"]);
  }
  if (staged.foreign.length > 0) {
    staged.undo();
    return reject(staged.foreign);
  }
  if (options.host !== true) {
    const hostOnly = hostOnlyChanges(schema, staged.previous, open.projection);
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
    return toStore(open, prepared, options, staged, { status: "committed", version: "" });
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
        : issuesOnItsOwn(schema, open.doc, meta.startFrontiers, prepared.bytes);
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
  return remaining(open, prepared, options, lost, conflicted);
}

/**
 * `apply_remaining`: the push without its writes that lose a committed change, or a refusal. Writes
 * into rows deleted since apply to nothing a reader sees; a field both changed gets the committed
 * value back in a change of the server's own; a delete of a row changed since cannot be left out
 * and refuses, as does a remainder that would leave the document invalid (ADR 0475).
 */
function remaining(
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
  // The fork holds the committed values put back: its rows are read anew.
  const reads = new RowReads(fork);
  const staged = stageChange(open.projection, fork, prepared.rows, reads);
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
    ...toStore(
      open,
      prepared,
      options,
      staged,
      { status: "conflicted", applied: true, version: "", reasons: lost, issues: [] },
      reads,
    ),
    bytes,
  };
}

/** A judged push to be stored: its answer at the fork's version, with the rows and facts stored with it. */
function toStore(
  open: OpenDocument & { issues: DocumentIssue[] },
  prepared: Prepared,
  options: PushOptions,
  staged: Staged,
  result: Exclude<PushResult, { status: "rejected" }>,
  /** The reads the rows were staged from: what they say of each row's maps is stored with it. */
  reads: RowReads = prepared.reads,
): Judged {
  const { fork, spans, planIds } = prepared;
  return {
    result: { ...result, version: encodeVersion(fork.oplogVersion()) },
    fork,
    undo: staged.undo,
    planIds,
    rows: rowChanges(open.projection, staged.rows, staged.previous, staged.previousRead, (root, rowId) =>
      reads.containersOf(root, rowId),
    ),
    before: staged.before,
    issues: nextIssues(open.issues, staged.scope, staged.after),
    // What the change log records if this is stored: counted off the rows just staged.
    change: {
      credential: options.host === true ? "host" : "document",
      peers: [...new Set(spans.map((span) => String(span.peer)))],
      planIds,
      // A change of fields alone creates and deletes nothing: it changed the entities it wrote.
      ...(staged.fieldsOf === undefined
        ? stagedCounts(open.projection, staged.previous, staged.previousRelations)
        : fieldCounts(staged.fieldsOf)),
    },
  };
}
