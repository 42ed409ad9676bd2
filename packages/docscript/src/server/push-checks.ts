/**
 * What the server checks of a push besides the schema: the plan ids it carries (exactly once), the
 * writes that no longer apply because another client changed the document underneath them (lost
 * updates), and host-only fields set without a host credential.
 */
import type { IdSpan, JsonChange, LoroDoc } from "loro-crdt";
import type { Projection } from "../document/projection.ts";
import { readRow } from "../document/row-shape.ts";
import type { Schema } from "../schema/define-schema.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { parentIdOf } from "./changed-rows.ts";

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

/** The changes in `spans` (all in `doc`), as Loro exports them: read once per push, by every check here. */
export function changesIn(doc: LoroDoc, spans: readonly IdSpan[]): JsonChange[] {
  return spans.flatMap((span) => doc.exportJsonInIdSpan(span));
}

/** The plan ids the changes in `spans` carry (`changes`: those changes, when already read). */
export function planIdsOf(
  doc: LoroDoc,
  spans: readonly IdSpan[],
  changes: readonly JsonChange[] = changesIn(doc, spans),
): string[] {
  const ids = new Set<string>();
  for (const change of changes) {
    const planId = planIdOfMessage(change.msg);
    if (planId !== undefined) ids.add(planId);
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
 * How deep below its root map a container may sit: a row (1), its fields (2) and 62 levels of payload.
 * Loro reads a row's value recursively inside its WebAssembly module, and a chain of ~10,000 nested
 * containers makes that read fail with "memory access out of bounds" and leaves the module broken for
 * every document in the process; so nothing deeper is ever read.
 */
export const maxContainerDepth = 64;

/**
 * What an update writes that no row can hold: a map key `__proto__` (read back through `toJSON`, it
 * sets an object's prototype instead of a key, so the value would be stored where no check reads it),
 * and a container nested deeper than `maxContainerDepth`. Read from the update's ops and the
 * containers' parents only, never from their values, so a hostile update is refused before any read.
 */
export function unreadableKeys(
  fork: LoroDoc,
  spans: readonly IdSpan[],
  changes: readonly JsonChange[] = changesIn(fork, spans),
  /** Depths known already (maps the container index places, ADR 0514): not walked. */
  known: ReadonlyMap<string, number> = new Map(),
): string[] {
  const found = new Set<string>();
  const depths = new Map<string, number>(known);
  for (const change of changes)
    for (const op of change.ops) {
      const key = (op.content as { key?: unknown }).key;
      if (key === "__proto__") found.add(`the update writes a key "__proto__" into ${op.container}`);
      if (containerDepth(fork, op.container, depths) > maxContainerDepth) {
        found.add(`the update nests containers more than ${maxContainerDepth} levels deep`);
        return [...found];
      }
    }
  return [...found];
}

/**
 * A container's depth below its root (a root is 0), walking parents up to a depth already known;
 * past `maxContainerDepth` it stops and answers one more than the bound. Linear in the containers.
 */
function containerDepth(doc: LoroDoc, id: string, depths: Map<string, number>): number {
  const chain: string[] = [];
  let current: string | undefined = id;
  let above = -1;
  while (current !== undefined) {
    const known = depths.get(current);
    if (known !== undefined) {
      above = known;
      break;
    }
    chain.push(current);
    if (chain.length > maxContainerDepth + 1) return maxContainerDepth + 1;
    current = parentIdOf(doc, current);
  }
  // chain[0] is `id`; the last is the root (above = -1) or sits below a container of known depth.
  for (let index = chain.length - 1, depth = above + 1; index >= 0; index--, depth++) {
    depths.set(chain[index] as string, depth);
  }
  return depths.get(id) ?? 0;
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

const hostOnlyKindsOf = new WeakMap<Schema, ReadonlySet<string>>();

/** The entity kinds with a host-only field. */
function hostOnlyKinds(schema: Schema): ReadonlySet<string> {
  let kinds = hostOnlyKindsOf.get(schema);
  if (kinds === undefined) {
    kinds = new Set(
      Object.keys(schema.entities).filter((kind) =>
        Object.values(ownValue(schema.entities, kind)?.fields ?? {}).some(
          (spec) => (spec as { hostOnly?: boolean }).hostOnly ?? false,
        ),
      ),
    );
    hostOnlyKindsOf.set(schema, kinds);
  }
  return kinds;
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
  const guarded = hostOnlyKinds(schema);
  for (const [rowId, json] of previous) {
    const now = projection.row(rowId)?.entities ?? [];
    // A row holding no entity of a kind with host-only fields sets none (the shift's 33,000 clips).
    if (!now.some((entity) => guarded.has(entity.entityKind))) continue;
    const before = new Map(
      (json === undefined ? [] : readRow(rowId, json, schema).entities).map((entity) => [
        entity.entityId,
        entity,
      ]),
    );
    for (const entity of now) {
      const fields = ownValue(schema.entities, entity.entityKind)?.fields ?? {};
      for (const [name, spec] of Object.entries(fields)) {
        if (!(spec as { hostOnly?: boolean }).hostOnly) continue;
        const was = before.get(entity.entityId)?.own[name] ?? null;
        const value = entity.own[name] ?? null;
        if (JSON.stringify(was) !== JSON.stringify(value)) changed.push(`${entity.entityId}.${name}`);
      }
    }
  }
  return changed;
}
