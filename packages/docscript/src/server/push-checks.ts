/**
 * What the server checks of a push besides the schema: the plan ids it carries (exactly once), the
 * writes that no longer apply because another client changed the document underneath them (lost
 * updates), and host-only fields set without a host credential.
 */

import type { ContainerID, IdSpan, LoroDoc } from "loro-crdt";
import { LoroMap } from "loro-crdt";
import type { ContainerIndex } from "../document/container-index.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { type Projection, readRow } from "../document/projection.ts";
import type { Schema } from "../schema/define-schema.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { rowOfContainer } from "./changed-rows.ts";

/** One write of a push that does not apply as its author saw it. */
export interface ConflictReason {
  /**
   * Against a change the push's base lacked: `entity_deleted` / `relation_deleted`: another client
   * deleted the row it writes; `entity_changed` / `relation_changed`: it deletes (or creates anew) a row
   * another client changed; `field_changed`: another client changed the same field or text; `issue`:
   * the merged document breaks a constraint there.
   */
  readonly reason:
    | "entity_deleted"
    | "relation_deleted"
    | "entity_changed"
    | "relation_changed"
    | "field_changed"
    | "issue";
  readonly entityId?: string;
  readonly relationId?: string;
  /** The field (or container key) the write set, when there is one. */
  readonly field?: string;
  readonly message: string;
}

/** The plan id a change's message names (`{"planId": …}`, as the edit-script tool commits). */
function planIdOfMessage(message: string | null | undefined): string | undefined {
  if (typeof message !== "string" || !message.startsWith("{")) return undefined;
  try {
    const parsed = JSON.parse(message) as { planId?: unknown };
    return typeof parsed.planId === "string" ? parsed.planId : undefined;
  } catch {
    return undefined;
  }
}

/** The plan ids the changes in `spans` carry. */
export function planIdsOf(doc: LoroDoc, spans: readonly IdSpan[]): string[] {
  const ids = new Set<string>();
  for (const span of spans) {
    for (const change of doc.exportJsonInIdSpan(span)) {
      const planId = planIdOfMessage(change.msg);
      if (planId !== undefined) ids.add(planId);
    }
  }
  return [...ids];
}

/** Every plan id the document's history holds, with the document's current version (read on open). */
export function appliedPlans(doc: LoroDoc): Map<string, string> {
  const plans = new Map<string, string>();
  const version = Buffer.from(doc.oplogVersion().encode()).toString("base64url");
  // Change by change along each peer's counters (`getAllChanges` costs seconds on a large history).
  for (const [peer, end] of doc.oplogVersion().toJSON()) {
    let counter = 0;
    while (counter < end) {
      const change = doc.getChangeAt({ peer, counter });
      const planId = planIdOfMessage(change.message);
      if (planId !== undefined) plans.set(planId, version);
      counter += Math.max(1, change.length);
    }
  }
  return plans;
}

/**
 * Map keys an update writes that no row can hold: `__proto__` (read back through `toJSON`, it sets an
 * object's prototype instead of a key, so the value would be stored where no check reads it).
 */
export function unreadableKeys(fork: LoroDoc, spans: readonly IdSpan[]): string[] {
  const found = new Set<string>();
  for (const span of spans)
    for (const change of fork.exportJsonInIdSpan(span))
      for (const op of change.ops) {
        const key = (op.content as { key?: unknown }).key;
        if (key === "__proto__") found.add(`the update writes a key "__proto__" into ${op.container}`);
      }
  return [...found];
}

const containerValuePrefix = "🦜:";

/** The last write of an update to one container key, with the row the container was in before it. */
export interface UpdateWrite {
  readonly container: string;
  readonly content: { type?: string; key?: unknown; value?: unknown };
  readonly row: { readonly root: string; readonly rowId: string };
}

/**
 * The writes of the update in `spans` (already imported into `fork`) into containers the document
 * held before it (`open`, before any row of the update is indexed): what the update leaves on each
 * container key, and the row that container belongs to.
 */
export function updateWrites(
  fork: LoroDoc,
  spans: readonly IdSpan[],
  open: { readonly doc: LoroDoc; readonly index: ContainerIndex },
): UpdateWrite[] {
  // The last op of the update on each container key: what the update leaves there.
  const last = new Map<
    string,
    { container: string; content: { type?: string; key?: unknown; value?: unknown } }
  >();
  for (const span of spans) {
    for (const change of fork.exportJsonInIdSpan(span)) {
      for (const op of change.ops) {
        if (op.container.startsWith("cid:root-")) continue;
        const content = op.content as { type?: string; key?: unknown; value?: unknown };
        const field = typeof content.key === "string" ? content.key : "";
        last.set(`${op.container}\u0000${field}`, { container: op.container, content });
      }
    }
  }
  const writes: UpdateWrite[] = [];
  for (const op of last.values()) {
    // Containers the server knew before this update: the update writes into a row that existed.
    const row = open.index.get(op.container) ?? rowOfContainer(open.doc, op.container, open.index);
    if (row === undefined || (row.root !== ENTITIES && row.root !== RELATIONS)) continue;
    writes.push({ ...op, row });
  }
  return writes;
}

/**
 * The writes (`updateWrites`) that no longer apply: writes into a row another client deleted, and map
 * values a concurrent write won over. `projection` holds the rows as the server had them before the
 * update (not yet staged). One reason per written row and key.
 */
export function lostWrites(
  fork: LoroDoc,
  writes: readonly UpdateWrite[],
  projection: Projection,
): ConflictReason[] {
  const reasons = new Map<string, ConflictReason>();
  for (const op of writes) {
    const row = op.row;
    const content = op.content;
    const field = typeof content.key === "string" ? content.key : undefined;
    const isEntity = row.root === ENTITIES;
    const alive = isEntity
      ? projection.rowJson(row.rowId) !== undefined
      : projection.relationJson(row.rowId) !== undefined;
    const rowKey = `${row.root}/${row.rowId}/${field ?? ""}`;
    if (reasons.has(rowKey)) continue;
    if (!alive) {
      reasons.set(
        rowKey,
        isEntity
          ? {
              reason: "entity_deleted",
              entityId: row.rowId,
              ...(field === undefined ? {} : { field }),
              message: `the write${field === undefined ? "" : ` to "${field}"`} of ${row.rowId} no longer applies: another client deleted ${row.rowId}`,
            }
          : {
              reason: "relation_deleted",
              relationId: row.rowId,
              ...(field === undefined ? {} : { field }),
              message: `the write${field === undefined ? "" : ` to "${field}"`} of relation ${row.rowId} no longer applies: another client deleted it (or one of its endpoints)`,
            },
      );
      continue;
    }
    if (content.type !== "insert" || field === undefined) continue;
    // A row the update itself deleted: nothing of it is meant to remain.
    if (fork.getMap(row.root).get(row.rowId) === undefined) continue;
    if (typeof content.value === "string" && content.value.startsWith(containerValuePrefix)) continue;
    const container = fork.getContainerById(op.container as ContainerID);
    if (!(container instanceof LoroMap)) continue;
    const now = container.get(field);
    const nowPlain = now instanceof LoroMap ? now.toJSON() : now;
    if (JSON.stringify(nowPlain ?? null) !== JSON.stringify(content.value ?? null)) {
      reasons.set(rowKey, {
        reason: "field_changed",
        ...(isEntity ? { entityId: row.rowId } : { relationId: row.rowId }),
        field,
        message: `the write of ${JSON.stringify(content.value)} to "${field}" of ${row.rowId} lost to another client's concurrent write (${JSON.stringify(nowPlain)})`,
      });
    }
  }
  return [...reasons.values()];
}

/** An issue the merge adds, as a conflict reason. */
export function issueReason(issue: DocumentIssue): ConflictReason {
  return {
    reason: "issue",
    ...(issue.entityId === undefined ? {} : { entityId: issue.entityId }),
    ...(issue.relationId === undefined ? {} : { relationId: issue.relationId }),
    ...(issue.path.length === 0 ? {} : { field: issue.path.join(".") }),
    message: `${issue.constraint}: ${issue.message}`,
  };
}

/**
 * Host-only fields the staged change set or changed: `previous` holds the changed rows as they were,
 * `projection` as they are now. Each as `entityId.field`.
 */
export function hostOnlyChanges(
  schema: Schema,
  previous: ReadonlyMap<string, unknown>,
  projection: Projection,
): string[] {
  const changed: string[] = [];
  for (const [rowId, json] of previous) {
    const before = new Map(
      (json === undefined ? [] : readRow(rowId, json, schema).entities).map((entity) => [
        entity.entityId,
        entity,
      ]),
    );
    for (const entity of projection.row(rowId)?.entities ?? []) {
      const fields = ownValue(schema.entities, entity.entityKind)?.fields ?? {};
      for (const [name, spec] of Object.entries(fields)) {
        if (!(spec as { hostOnly?: boolean }).hostOnly) continue;
        const was = before.get(entity.entityId)?.own[name] ?? null;
        const now = entity.own[name] ?? null;
        if (JSON.stringify(was) !== JSON.stringify(now)) changed.push(`${entity.entityId}.${name}`);
      }
    }
  }
  return changed;
}
