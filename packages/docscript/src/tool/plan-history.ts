/**
 * A committed plan read back out of the document's history (issue 25, point 7): its changes as a diff
 * (`plan-diff`), and a new plan that inverts it (`revert-plan`). A plan is the changes of the one Loro
 * peer its run wrote on (a fresh peer per run, `runEditScript`), found by the plan id its last change
 * carries. The revert is made on the version the plan left, not on the current one: pushed, the server
 * checks it like any plan, so a later change to a row or field the revert writes (another user's, or a
 * later plan's) makes it `conflicted` (the lost-update rule, ADR 0475) instead of being undone.
 */
import { type Frontiers, type LoroDoc, LoroMap } from "loro-crdt";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { readRelationRow, readRow, type StoredEntity, type StoredRelation } from "../document/row-shape.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { changedRows } from "../server/changed-rows.ts";
import { elide, fieldChanges, type PlanPreview, type PreviewChange, previewLimit } from "./plan-preview.ts";

/** Where a committed plan sits in the document's history. */
export interface PlanSpan {
  readonly planId: string;
  readonly peer: `${number}`;
  /** The version the plan was made on, and the one it left (its own changes on top of that). */
  readonly before: Frontiers;
  readonly after: Frontiers;
}

function messageOf(message: string | null | undefined): Record<string, unknown> | undefined {
  if (typeof message !== "string" || !message.startsWith("{")) return undefined;
  try {
    const parsed = JSON.parse(message) as unknown;
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The committed plan `planId` in `doc`'s history; `not_found` when the history holds no such plan, and
 * `plan_refused` when the server stored it only in part (`apply_remaining`), which no revert inverts.
 */
export function findPlan(doc: LoroDoc, planId: string): PlanSpan {
  let found: { peer: `${number}`; end: number } | undefined;
  let partly = false;
  // Change by change along each peer's counters (`getAllChanges` costs seconds on a large history).
  for (const [peer, end] of doc.oplogVersion().toJSON()) {
    let counter = 0;
    while (counter < end) {
      const change = doc.getChangeAt({ peer, counter });
      const message = messageOf(change.message);
      if (message?.planId === planId) found = { peer, end };
      const remainingOf = message?.remainingOf;
      if (Array.isArray(remainingOf) && remainingOf.includes(planId)) partly = true;
      counter += Math.max(1, change.length);
    }
  }
  if (found === undefined)
    throw DocScriptError.notFound("plan", planId, `the document's history holds no committed plan ${planId}`);
  if (partly)
    throw new DocScriptError(
      "plan_refused",
      `plan ${planId} was stored in part (apply_remaining): revert-plan inverts only plans committed whole`,
    );
  const first = doc.getChangeAt({ peer: found.peer, counter: 0 });
  return {
    planId,
    peer: found.peer,
    before: first.deps,
    after: [{ peer: found.peer, counter: found.end - 1 }],
  };
}

/** The entities and relations the rows `rows` of `doc` hold, by id. */
function readRows(doc: LoroDoc, rows: { entities: Set<string>; relations: Set<string> }, schema: Schema) {
  const entities = new Map<string, StoredEntity>();
  const relations = new Map<string, StoredRelation>();
  const json = (root: string, rowId: string): unknown => {
    const value = doc.getMap(root).get(rowId) as unknown;
    return value instanceof LoroMap ? value.toJSON() : value;
  };
  for (const rowId of rows.entities) {
    const value = json(ENTITIES, rowId);
    if (value === undefined) continue;
    const record = readRow(rowId, value, schema);
    for (const entity of record.entities) entities.set(entity.entityId, entity);
    for (const relation of record.relations) relations.set(relation.relationId, relation);
  }
  for (const relationId of rows.relations) {
    const value = json(RELATIONS, relationId);
    if (value !== undefined) relations.set(relationId, readRelationRow(relationId, value));
  }
  return { entities, relations };
}

/**
 * What `doc` changed between two of its versions, as a preview reads (created, updated, deleted
 * entities; linked, moved, unlinked relations), read from the rows the changes touched only. The counts
 * are whole; at most `previewLimit` changes are listed and `omitted` says the rest.
 */
export function diffVersions(doc: LoroDoc, from: Frontiers, to: Frontiers, schema: Schema): PlanPreview {
  const rows = changedRows(doc, from, to);
  const was = readRows(doc.forkAt(from), rows, schema);
  const now = readRows(doc.forkAt(to), rows, schema);
  const all: PreviewChange[] = [];
  const counts = { created: 0, updated: 0, deleted: 0, linked: 0, moved: 0, unlinked: 0 };
  for (const [entityId, entity] of now.entities) {
    const before = was.entities.get(entityId);
    if (before === undefined) {
      counts.created++;
      all.push({ change: "created", entityId, entityKind: entity.entityKind, payload: elide(entity.own) });
      continue;
    }
    const fields = fieldChanges(before.own, entity.own);
    if (fields.length === 0) continue;
    counts.updated++;
    all.push({ change: "updated", entityId, entityKind: entity.entityKind, fields });
  }
  for (const [entityId, entity] of was.entities) {
    if (now.entities.has(entityId)) continue;
    counts.deleted++;
    all.push({ change: "deleted", entityId, entityKind: entity.entityKind });
  }
  const ends = (relation: StoredRelation) => ({
    relationId: relation.relationId,
    relationKind: relation.relationKind,
    endpoint0EntityId: relation.endpoint0EntityId,
    endpoint1EntityId: relation.endpoint1EntityId,
  });
  for (const [relationId, relation] of now.relations) {
    const before = was.relations.get(relationId);
    if (before === undefined) {
      counts.linked++;
      all.push({ change: "linked", ...ends(relation) });
    } else if (
      before.endpoint0EntityId !== relation.endpoint0EntityId ||
      before.endpoint1EntityId !== relation.endpoint1EntityId ||
      before.position !== relation.position
    ) {
      counts.moved++;
      all.push({ change: "moved", ...ends(relation) });
    }
  }
  for (const [relationId, relation] of was.relations) {
    if (now.relations.has(relationId)) continue;
    counts.unlinked++;
    all.push({ change: "unlinked", ...ends(relation) });
  }
  const changes = all.slice(0, previewLimit);
  return { writes: all.length, counts, changes, omitted: all.length - changes.length };
}

/** A committed plan's changes, as a diff of the version it was made on and the one it left. */
export function planDiff(doc: LoroDoc, planId: string, schema: Schema): PlanPreview {
  const span = findPlan(doc, planId);
  return diffVersions(doc, span.before, span.after, schema);
}

/**
 * A new plan, `revertPlanId`, that puts back what the committed plan `planId` changed: made on the
 * version the plan left (so a later change to what it writes is concurrent with it, and the server
 * answers `conflicted`), authored on `peerId`. Its update, the version it was made on, and its preview.
 */
export function revertPlan(
  doc: LoroDoc,
  planId: string,
  options: {
    readonly revertPlanId: string;
    readonly peerId: string;
    readonly actor?: string;
    schema: Schema;
  },
): { update: Uint8Array; baseFrontiers: Frontiers; preview: PlanPreview } {
  const span = findPlan(doc, planId);
  const fork = doc.forkAt(span.after);
  fork.setPeerId(options.peerId as `${number}`);
  const from = fork.oplogVersion();
  fork.revertTo(span.before);
  fork.commit({
    message: JSON.stringify({
      planId: options.revertPlanId,
      revertOf: planId,
      actor: options.actor ?? null,
    }),
    origin: "docscript-revert",
  });
  return {
    update: fork.export({ mode: "update", from }),
    baseFrontiers: span.after,
    preview: diffVersions(fork, span.after, fork.frontiers(), options.schema),
  };
}
