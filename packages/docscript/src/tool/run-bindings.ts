/**
 * The script's bindings on the host (ADR 0464): `entities` and `relations` over a run's document session,
 * each write checked as it lands and tallied for the plan's preview; a phonetic script's text is held
 * for the host's `uploadText`, and a stored file's key checked against the store's grammar.
 */
import type { DocumentSession } from "../document/document-session.ts";
import type { Projection } from "../document/projection.ts";
import type { UpdateOp as SessionUpdateOp } from "../document/update-op.ts";
import type { Schema } from "../schema/define-schema.ts";
import { ownValue } from "../schema/own-keys.ts";
import { fileKeyProblem, maxUploadTextChars } from "./asset-hooks.ts";
import {
  type SignaturesMatch,
  type SyncEntities,
  type SyncRelations,
  scriptEntity,
} from "./binding-contract.ts";
import { declareFields } from "./field-declarations.ts";
import { maxReadItems, type RunSessionInput } from "./run-session.ts";
import type { FieldRange, Relation } from "./script-api.ts";
import { updateMany } from "./script-bulk.ts";
import { fileOf, storedFileKinds, uploadedTextFields } from "./stored-files.ts";
import { refused } from "./value-shapes.ts";

/** What a run's writes did, for its preview and its finish step. */
export interface RunTally {
  /** The last state of each relation the plan linked or moved, for the preview. */
  readonly relationStates: Map<string, Relation>;
  readonly created: Set<string>;
  readonly updated: Set<string>;
  readonly deleted: Set<string>;
  readonly linked: Set<string>;
  readonly moved: Set<string>;
  readonly unlinked: Set<string>;
  /** Relations a delete took with it, with the entity whose delete did. */
  readonly cascaded: Map<string, Relation & { by: string }>;
  readonly pendingUploads: Map<string, { field: string; text: string }>;
  writes: number;
}

export function newTally(): RunTally {
  return {
    relationStates: new Map(),
    created: new Set(),
    updated: new Set(),
    deleted: new Set(),
    linked: new Set(),
    moved: new Set(),
    unlinked: new Set(),
    cascaded: new Map(),
    pendingUploads: new Map(),
    writes: 0,
  };
}

/** A phonetic script's phoneme text is stored by the host; the row holds null until the plan is built. */
function takeUploads(
  input: RunSessionInput,
  entityKind: string,
  entityId: string | undefined,
  payload: Record<string, unknown>,
): { field: string; text: string; entityId: string | undefined } | undefined {
  const field = uploadedTextFields[entityKind];
  if (field === undefined || typeof payload[field] !== "string") return undefined;
  if (!input.hooks.uploadText) {
    throw refused(
      "upload_unavailable",
      `${entityKind}.${field} text is stored by the host's uploadText, which this host does not offer`,
    );
  }
  const text = payload[field] as string;
  if (text.length > maxUploadTextChars) {
    throw refused(
      "upload_too_large",
      `${entityKind}.${field} is ${text.length} characters; the host stores at most ${maxUploadTextChars}`,
      [
        {
          constraint: "upload.maxLength",
          message: `at most ${maxUploadTextChars} characters`,
          path: [field],
          ...(entityId === undefined ? {} : { entityId }),
        },
      ],
    );
  }
  payload[field] = null;
  return { field, text, entityId };
}

/** A file a new entity names must have a key the host's store can take as a plain relative name. */
function checkFileKey(entityKind: string, payload: Record<string, unknown>): void {
  if (!storedFileKinds.has(entityKind)) return;
  const file = fileOf({ entityKind, payload });
  const problem = file === undefined ? undefined : fileKeyProblem(file.key);
  if (problem !== undefined)
    throw refused("file_key_refused", `${entityKind}: ${problem}`, [
      {
        constraint: "file.key",
        message: problem,
        path: entityKind === "audio-script" ? ["transcription", "key"] : ["key"],
      },
    ]);
}

/** An update's ops with a phonetic script's phoneme text held for the host's upload instead. */
function heldUploads(
  input: RunSessionInput,
  entityKind: string,
  entityId: string,
  ops: SessionUpdateOp[],
): { rewritten: SessionUpdateOp[]; upload: { field: string; text: string } | undefined } {
  let upload: { field: string; text: string } | undefined;
  const field = uploadedTextFields[entityKind];
  const rewritten = Array.isArray(ops)
    ? ops.map((op) => {
        if (
          field !== undefined &&
          op?.op === "set" &&
          op.path?.length === 1 &&
          op.path[0] === field &&
          typeof op.value === "string"
        ) {
          const payload: Record<string, unknown> = { [field]: op.value };
          upload = takeUploads(input, entityKind, entityId, payload);
          return { ...op, value: payload[field] } as SessionUpdateOp;
        }
        return op;
      })
    : ops;
  return { rewritten, upload };
}

/** Deletes an entity and tallies what it takes with it. */
function deleteEntity({ schema, session, tally }: BindingContext, entityId: string): void {
  const { created, updated, deleted, linked, moved, unlinked, cascaded, pendingUploads } = tally;
  // What the delete takes with it, for the preview: every relation touching it (clips taken off a
  // deleted track) and an entity embedded in its row (a clip's marker). Read before it lands.
  const touching = typeof entityId === "string" ? session.relations.list({ entityId }) : [];
  const embedded = touching
    .filter((relation) => relation.relationId.startsWith(`${entityId}#`))
    .map((relation) => relation.endpoint1EntityId)
    .filter((id) => schema.embeddedKinds.has(session.entities.get(id)?.entityKind ?? ""));
  session.entities.delete(entityId);
  tally.writes++;
  for (const relation of touching) {
    moved.delete(relation.relationId);
    if (linked.delete(relation.relationId)) continue;
    unlinked.add(relation.relationId);
    cascaded.set(relation.relationId, { ...relation, by: entityId });
  }
  for (const id of [entityId, ...embedded]) {
    pendingUploads.delete(id);
    if (created.delete(id)) continue;
    updated.delete(id);
    deleted.add(id);
  }
}

/** The `entities` binding of a run. */
function entityBindings(context: BindingContext) {
  const { input, schema, session, base, tally } = context;
  const { created, updated, pendingUploads } = tally;
  const inBase = (entityId: string) => base.claimsOf(entityId).length > 0;
  const entities = {
    list(filter?: { entityKind?: string; range?: FieldRange; limit?: number; after?: string }) {
      const limit = filter?.limit;
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= maxReadItems))
        throw refused(
          "invalid_operation",
          `entities.list: limit is a whole number from 1 to ${maxReadItems}, not ${JSON.stringify(limit)}`,
        );
      if (filter?.after !== undefined && typeof filter.after !== "string")
        throw refused("invalid_operation", "entities.list: after is an entityId (a string)");
      return session.entities
        .list({
          ...(filter?.entityKind === undefined ? {} : { entityKind: filter.entityKind }),
          ...(filter?.range === undefined ? {} : { range: filter.range }),
          ...(limit === undefined ? {} : { limit }),
          ...(filter?.after === undefined ? {} : { after: filter.after }),
          atMost: maxReadItems,
        })
        .map(scriptEntity);
    },
    get(entityId: string) {
      const entity = session.entities.get(entityId);
      return entity === undefined ? null : scriptEntity(entity);
    },
    create(raw: { entityKind: string; payload?: Record<string, unknown>; variantOf?: string }) {
      if (typeof raw !== "object" || raw === null || typeof raw.entityKind !== "string") {
        throw refused("invalid_operation", "create takes { entityKind, payload?, variantOf? }");
      }
      const payload = { ...(raw.payload ?? {}) };
      checkFileKey(raw.entityKind, payload);
      const upload = takeUploads(input, raw.entityKind, undefined, payload);
      const entity = session.entities.create({
        entityKind: raw.entityKind,
        payload,
        ...(raw.variantOf === undefined ? {} : { variantOf: raw.variantOf }),
      });
      if (!inBase(entity.entityId) && !created.has(entity.entityId)) {
        created.add(entity.entityId);
        tally.writes++;
      }
      if (upload !== undefined) pendingUploads.set(entity.entityId, upload);
      return scriptEntity(entity);
    },
    update(entityId: string, ops: SessionUpdateOp[]) {
      const current = session.entities.get(entityId);
      if (current === undefined) return scriptEntity(session.entities.update(entityId, ops));
      const { rewritten, upload } = heldUploads(input, current.entityKind, entityId, ops);
      const entity = session.entities.update(entityId, rewritten);
      if (upload !== undefined) pendingUploads.set(entityId, upload);
      if (!created.has(entityId)) updated.add(entityId);
      tally.writes++;
      return scriptEntity(entity);
    },
    updateMany(updates: { entityId: string; ops: SessionUpdateOp[] }[]) {
      const count = updateMany(session, updates, uploadedTextFields, maxReadItems);
      for (const { entityId } of updates) if (!created.has(entityId)) updated.add(entityId);
      tally.writes += count;
      return count;
    },
    declareFields(entityKind: string) {
      const kind = ownValue(schema.entities, entityKind);
      if (kind === undefined) {
        throw refused(
          "unknown_kind",
          `"${entityKind}" is not an entity kind; kinds: ${Object.keys(schema.entities).join(", ")}`,
        );
      }
      return declareFields(kind.fields);
    },
    delete(entityId: string) {
      deleteEntity(context, entityId);
    },
  } satisfies SyncEntities;
  const entitiesMatch: SignaturesMatch<typeof entities, SyncEntities> = true;
  void entitiesMatch;
  return entities;
}

/** The `relations` binding of a run. */
function relationBindings({ session, tally }: BindingContext) {
  const { relationStates, linked, moved, unlinked } = tally;
  const relations = {
    list(filter?: { relationKind?: string; entityId?: string; limit?: number; after?: string }) {
      const limit = filter?.limit;
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= maxReadItems))
        throw refused(
          "invalid_operation",
          `relations.list: limit is a whole number from 1 to ${maxReadItems}, not ${JSON.stringify(limit)}`,
        );
      if (filter?.after !== undefined && typeof filter.after !== "string")
        throw refused(
          "invalid_operation",
          `relations.list: after is a relationId (a string), not ${JSON.stringify(filter.after)}`,
        );
      return session.relations.list({
        ...(filter?.relationKind === undefined ? {} : { relationKind: filter.relationKind }),
        ...(filter?.entityId === undefined ? {} : { entityId: filter.entityId }),
        ...(limit === undefined ? {} : { limit }),
        ...(filter?.after === undefined ? {} : { after: filter.after }),
        atMost: maxReadItems,
      });
    },
    of(entityId: string, relationKind?: string, ends?: { first?: number; last?: number }) {
      if (typeof entityId !== "string" || ends !== undefined)
        return session.relations.of(entityId, relationKind, ends);
      return session.relations.list({
        entityId,
        ...(relationKind === undefined ? {} : { relationKind }),
        atMost: maxReadItems,
      });
    },
    link(raw: {
      relationKind: string;
      endpoint0EntityId: string;
      endpoint1EntityId: string;
      index?: number;
    }) {
      if (typeof raw !== "object" || raw === null)
        throw refused(
          "invalid_operation",
          "link takes { relationKind, endpoint0EntityId, endpoint1EntityId, index? }",
        );
      const relation = session.relations.link(raw);
      relationStates.set(relation.relationId, relation);
      linked.add(relation.relationId);
      unlinked.delete(relation.relationId);
      tally.writes++;
      return relation;
    },
    move(relationId: string, target: { endpoint0EntityId?: string; index?: number }) {
      const relation = session.relations.move(relationId, target ?? {});
      relationStates.set(relation.relationId, relation);
      if (!linked.has(relation.relationId)) moved.add(relation.relationId);
      tally.writes++;
      return relation;
    },
    unlink(relationId: string) {
      session.relations.unlink(relationId);
      tally.writes++;
      moved.delete(relationId);
      if (!linked.delete(relationId)) unlinked.add(relationId);
    },
  } satisfies SyncRelations;
  const relationsMatch: SignaturesMatch<typeof relations, SyncRelations> = true;
  void relationsMatch;
  return relations;
}

interface BindingContext {
  readonly input: RunSessionInput;
  readonly schema: Schema;
  readonly session: DocumentSession;
  readonly base: Projection;
  readonly tally: RunTally;
}

/** The bindings a run's script calls, by binding and method. */
export function scriptBindings(
  input: RunSessionInput,
  schema: Schema,
  session: DocumentSession,
  base: Projection,
  tally: RunTally,
): Record<string, Record<string, (...args: never[]) => unknown>> {
  const context: BindingContext = { input, schema, session, base, tally };
  return { entities: entityBindings(context), relations: relationBindings(context) };
}
