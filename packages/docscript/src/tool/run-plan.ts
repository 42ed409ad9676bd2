/**
 * A run's finish step on the host (ADR 0464, 0451): the uploads it held stored, the stored files it names
 * read for their facts, the issues the plan adds (checked by scope), and the preview of what it changes.
 */
import { checkDocument, issueKey } from "../document/check-document.ts";
import type { DocumentSession } from "../document/document-session.ts";
import type { Projection } from "../document/projection.ts";
import type { UpdateOp as SessionUpdateOp } from "../document/update-op.ts";
import type { DocumentIssue, Entity as SessionEntity } from "../schema/types.ts";
import {
  elide,
  type FieldChange,
  fieldChanges,
  type PlanPreview,
  type PreviewChange,
  previewLimit,
} from "./plan-preview.ts";
import type { RunTally } from "./run-bindings.ts";
import type { RunSessionHost, RunSessionInput } from "./run-session.ts";
import { fileOf, requiresStorage, storedFileKinds } from "./stored-files.ts";
import { refused } from "./value-shapes.ts";

export interface PlanContext {
  readonly input: RunSessionInput;
  readonly host: RunSessionHost;
  readonly session: DocumentSession;
  readonly base: Projection;
  readonly tally: RunTally;
  /** Runs `work` until the projection lacks nothing (rows on demand, ADR 0466). */
  filled<T>(work: () => T, landing: boolean): Promise<T>;
}

/** Reads each stored file the plan names anew or changes, and records the facts where none are stated. */
async function recordFileFacts(context: PlanContext, hostSession: () => DocumentSession): Promise<void> {
  const { input, host, session, filled } = context;
  const { created, updated } = context.tally;
  // The plan's entities read in one fill, not an await each (a shift of 33,000 markers spent ~0.1 s
  // here): each write below sets its own entity's facts only, so no read is stale when it is used.
  const written = await filled(
    () => [...created, ...updated].map((entityId) => session.entities.get(entityId)),
    false,
  );
  const files = written.filter(
    (entity): entity is SessionEntity =>
      entity !== undefined && storedFileKinds.has(entity.entityKind) && fileOf(entity) !== undefined,
  );
  for (const entity of files) {
    const { entityId } = entity;
    if (!input.hooks.loadEntityAsset) {
      if (requiresStorage(entity) && entity.payload.storageKey == null) {
        throw refused(
          "storage_key_missing",
          `${entityId}: a ${entity.entityKind} plays from storage, and without the host's loadEntityAsset its storageKey stays unknown`,
        );
      }
      continue;
    }
    let facts: { storageKey?: unknown; digest?: unknown };
    try {
      facts = (await host.call("loadEntityAsset", { entity })) as {
        storageKey?: unknown;
        digest?: unknown;
      };
    } catch (error) {
      throw refused(
        "asset_unreadable",
        `${entityId}: the store cannot read its file: ${(error as Error).message}`,
      );
    }
    const ops: SessionUpdateOp[] = [];
    for (const name of ["storageKey", "digest"] as const) {
      if (entity.payload[name] == null && typeof facts?.[name] === "string")
        ops.push({ op: "set", path: [name], value: facts[name] });
    }
    if (ops.length > 0) await filled(() => hostSession().entities.update(entityId, ops), true);
    if (
      requiresStorage(entity) &&
      entity.payload.storageKey == null &&
      ops.every((op) => op.path[0] !== "storageKey")
    ) {
      throw refused(
        "storage_key_missing",
        `${entityId}: a ${entity.entityKind} plays from storage, and the store names no storageKey for it`,
      );
    }
  }
}

/** Stores the texts the run held for upload and records the files they became. */
async function storeUploads(context: PlanContext, hostSession: () => DocumentSession): Promise<void> {
  const { host, filled } = context;
  for (const [entityId, upload] of context.tally.pendingUploads) {
    let stored: { system?: unknown; key?: unknown };
    try {
      stored = (await host.call("uploadText", { text: upload.text })) as {
        system?: unknown;
        key?: unknown;
      };
    } catch (error) {
      throw refused(
        "upload_failed",
        `${entityId}.${upload.field}: the text could not be stored: ${(error as Error).message}`,
      );
    }
    await filled(
      () =>
        hostSession().entities.update(entityId, [
          { op: "set", path: [upload.field], value: { system: stored.system, key: stored.key } },
        ]),
      true,
    );
  }
}

/**
 * The issues the plan adds (ADR 0451): the document's issues within everything the plan's writes could
 * have changed (the host's recorded file facts included), less those the base already had there.
 * Outside that scope the document reads as the base did, so this equals the whole-document check's
 * difference without reading every entity.
 */
function planIssues({ session, base }: PlanContext): DocumentIssue[] {
  const scope = session.changedScope();
  const issues = session.check(scope);
  if (issues.length === 0) return issues;
  const before = new Set(checkDocument(base, scope).map(issueKey));
  return issues.filter((issue) => !before.has(issueKey(issue)));
}

/** The fields an update changed, base → plan, dotted paths into records; long values elided. */
function payloadChanges(base: Projection, entityId: string, after: SessionEntity): FieldChange[] {
  return fieldChanges(base.entity(entityId)?.payload ?? {}, after.payload);
}

/** What the plan changes, one entry per entity or relation (at most `previewLimit`), with whole counts. */
function preview(context: PlanContext): PlanPreview {
  const { session, base, tally } = context;
  const { relationStates, created, updated, deleted, linked, moved, unlinked, cascaded } = tally;
  const changes: PreviewChange[] = [];
  const add = (change: () => PreviewChange | undefined) => {
    if (changes.length >= previewLimit) return;
    const made = change();
    if (made !== undefined) changes.push(made);
  };
  for (const id of created)
    add(() => {
      const entity = session.entities.get(id);
      return entity === undefined
        ? undefined
        : {
            change: "created",
            entityId: id,
            entityKind: entity.entityKind,
            payload: elide(entity.payload),
          };
    });
  for (const id of updated)
    add(() => {
      const entity = session.entities.get(id);
      return entity === undefined
        ? undefined
        : {
            change: "updated",
            entityId: id,
            entityKind: entity.entityKind,
            fields: payloadChanges(base, id, entity),
          };
    });
  for (const id of deleted)
    add(() => {
      const kind = base.entity(id)?.entityKind;
      return { change: "deleted", entityId: id, ...(kind === undefined ? {} : { entityKind: kind }) };
    });
  for (const [ids, change] of [
    [linked, "linked"],
    [moved, "moved"],
  ] as const)
    for (const id of ids)
      add(() => {
        const relation = relationStates.get(id);
        return relation === undefined ? undefined : { change, ...relation };
      });
  for (const id of unlinked)
    add(() => {
      const taken = cascaded.get(id);
      if (taken !== undefined) return { change: "unlinked", ...taken };
      const kind = base.storedRelation(id)?.relationKind;
      return { change: "unlinked", relationId: id, ...(kind === undefined ? {} : { relationKind: kind }) };
    });
  const total = created.size + updated.size + deleted.size + linked.size + moved.size + unlinked.size;
  // What the deletes leave unreferenced: entities a deleted one was related to that nothing touches now.
  // One with more relations at the base than the run took off or moved anywhere is touched still,
  // told from a page of them: a deleted clip's track of thousands is not read whole.
  const unreferenced = new Set<string>();
  const removed = unlinked.size + moved.size + deleted.size;
  for (const id of deleted) {
    for (const relation of base.relationsOf(id)) {
      for (const other of [relation.endpoint0EntityId, relation.endpoint1EntityId]) {
        if (other === id || deleted.has(other) || unreferenced.size >= 50) continue;
        if (base.hasMoreRelations(other, removed)) continue;
        if (session.entities.get(other) !== undefined && session.relations.of(other).length === 0)
          unreferenced.add(other);
      }
    }
  }
  return {
    writes: tally.writes,
    counts: {
      created: created.size,
      updated: updated.size,
      deleted: deleted.size,
      linked: linked.size,
      moved: moved.size,
      unlinked: unlinked.size,
    },
    changes,
    omitted: total - changes.length,
    ...(unreferenced.size === 0 ? {} : { unreferenced: [...unreferenced] }),
  };
}

/** The finish step's parts, bound to one run. */
export function planSteps(context: PlanContext) {
  return {
    recordFileFacts: (hostSession: () => DocumentSession) => recordFileFacts(context, hostSession),
    storeUploads: (hostSession: () => DocumentSession) => storeUploads(context, hostSession),
    planIssues: () => planIssues(context),
    preview: () => preview(context),
  };
}
