/**
 * A run's document session, on the host (ADR 0464): the script's binding calls reach it through the
 * sandbox's sync host calls, so the worker never holds the document. It opens the run document (the
 * host's detached plan doc at the run's version, over an overlay of the kept projection: ADR 0464) as a
 * document session on the run's fresh peer, answers the script's reads and writes (each write checked
 * as it lands), and once the script ends turns everything it did into one checked Loro update — the
 * plan (checked by scope: ADR 0451).
 */

import { randomBytes } from "node:crypto";
import type { LoroDoc } from "loro-crdt";
import { checkDocument, issueKey } from "../document/check-document.ts";
import { type DocumentSession, openDocument } from "../document/document-session.ts";
import { type Projection, RowsNeeded } from "../document/projection.ts";
import type { UpdateOp as SessionUpdateOp } from "../document/update-op.ts";
import type { ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError, type DocScriptErrorCode } from "../schema/docscript-error.ts";
import { ownValue } from "../schema/own-keys.ts";
import type { DocumentIssue, Entity as SessionEntity } from "../schema/types.ts";
import { fileKeyProblem, maxUploadTextChars } from "./asset-hooks.ts";
import { declareFields } from "./field-declarations.ts";
import {
  elide,
  type FieldChange,
  type PlanPreview,
  type PreviewChange,
  previewLimit,
} from "./plan-preview.ts";
import { maxFillRounds, remoteRowsOf } from "./remote-projection.ts";
import type { Entity, FieldRange, Relation, ScriptEntities, ScriptRelations } from "./script-api.ts";
import { updateMany } from "./script-bulk.ts";
import { fileOf, requiresStorage, storedFileKinds, uploadedTextFields } from "./stored-files.ts";

/**
 * A binding's contract as function-typed properties: the contract declares methods, whose parameters
 * TypeScript checks both ways (bivariantly); as function types they are checked strictly, so a binding
 * that needs more than the contract gives, or returns something else, fails the type-check.
 */
type Implemented<Contract> = {
  [Method in keyof Contract]: Contract[Method] extends (...args: infer Args) => infer Result
    ? (...args: Args) => Result
    : never;
};

type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
type Signature<F> = F extends (...args: infer Args) => infer Result
  ? { arity: Args["length"]; result: Result }
  : never;
/**
 * `satisfies` lets a binding take fewer parameters or return a narrower type than the contract states;
 * this also holds each method's parameter count and return type equal to the contract's, so a contract
 * that promises a parameter the binding ignores, or a reply it never gives, fails the type-check too.
 */
type SignaturesMatch<Bindings, Contract> = false extends {
  [Method in keyof Contract]: Method extends keyof Bindings
    ? Equal<Signature<Bindings[Method]>, Signature<Contract[Method]>>
    : false;
}[keyof Contract]
  ? false
  : true;

/** The bindings the sandbox answers synchronously; `materialize` answers through `callAsync`. */
type SyncEntities = Implemented<Omit<ScriptEntities, "materialize">>;
type SyncRelations = Implemented<ScriptRelations>;

/**
 * The session's entity as the contract states it. The projection reads payloads out of Loro maps, lists
 * and text, which hold only JSON values, and each reply crosses into the script as JSON text; the
 * session types them `unknown` because it also validates raw input, so this is the one place that says so.
 */
function scriptEntity(entity: SessionEntity): Entity {
  return entity as Entity;
}

/** What a run's session is opened with. */
export interface RunSessionInput {
  readonly docId: string;
  readonly planId: string;
  readonly actor?: string;
  /** The fresh Loro peer this run authors its plan on (a decimal string). */
  readonly peerId: string;
  readonly hooks: { readonly loadEntityAsset: boolean; readonly uploadText: boolean };
}

/** The document a run works on: the host's run doc at the run's version, and its kept projection. */
export interface RunDocument {
  /** Written by this run only; its state is the run's version when the run starts. */
  readonly doc: LoroDoc;
  /** The projection of that version, read-only: the session works on an overlay of it. */
  readonly base: Projection;
  /** How the host got the document: kept at this version, caught up by the updates since, or read whole. */
  readonly source: "cached" | "updated" | "snapshot";
  /** Problems the host recovered from while getting the document, for its log. */
  readonly warnings?: readonly string[];
}

/** What a run returns: the plan's update bytes and what the plan changes. */
export interface EditScriptPlanBody {
  readonly update: Uint8Array;
  readonly preview: PlanPreview;
  /** Keys of the media the plan created, for `loadGenerationFacts` after a confirmed commit. */
  readonly createdFileKeys: readonly string[];
  /** How the host got the document: kept at this version, caught up by the updates since, or read whole. */
  readonly documentSource: RunDocument["source"];
  /** Problems the host recovered from while getting the document, for its log. */
  readonly documentWarnings: readonly string[];
}

/** The host's hooks a session calls (`loadEntityAsset`, `uploadText`), by name. */
export interface RunSessionHost {
  call(method: string, payload: unknown): Promise<unknown>;
}

/** A run's session as the host's answers to the worker: sync bindings, `materialize`, and the end. */
export interface RunSession {
  call(binding: string, method: string, args: readonly unknown[]): unknown;
  /**
   * `call`, over a projection that reads rows on demand (ADR 0466): asked again after each fill of what
   * it lacked, until it lacks nothing; a write lands only then. Over a whole projection, `call`.
   */
  callFilled(binding: string, method: string, args: readonly unknown[]): Promise<unknown>;
  callAsync(binding: string, method: string, args: readonly unknown[]): Promise<unknown>;
  finish(outcome: ScriptOutcome): Promise<EditScriptPlanBody>;
}

const schemas = new Map<string, Promise<Schema>>();

/** The schema a module exports under `exportName`, imported once per process. */
export function loadSchema(module: string, exportName: string): Promise<Schema> {
  const key = `${module}#${exportName}`;
  let loading = schemas.get(key);
  if (loading === undefined) {
    loading = import(module).then((loaded: Record<string, unknown>) => {
      const schema = loaded[exportName] as Schema | undefined;
      if (schema?.entities === undefined) throw new Error(`${module} exports no schema named ${exportName}`);
      return schema;
    });
    schemas.set(key, loading);
  }
  return loading;
}

/**
 * The most entities or relations one read answers. A script that would read more (every clip of a
 * million-entity timeline, say) is refused with `read_limit` before the answer is built: it reads
 * entities and relations in pages (`limit`, `after`), by kind, by id or by the relations of an entity
 * instead.
 */
export const maxReadItems = 20_000;

/** A value as a model needs to see it to fix a write: its type and size, never its whole content. */
export function valueShape(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `array of ${value.length}`;
  if (typeof value === "string")
    return value.length <= 40 ? `string ${JSON.stringify(value)}` : `string of ${value.length} characters`;
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object);
    return `object {${keys.slice(0, 8).join(", ")}${keys.length > 8 ? ", …" : ""}}`;
  }
  return typeof value;
}

/** The value a write gave at `path`: an update op's value at that path, or a created payload's field. */
function valueAt(
  args: readonly unknown[],
  path: readonly (string | number)[],
): { found: boolean; value?: unknown } {
  const [first, second] = args;
  if (Array.isArray(second)) {
    for (const op of second as { path?: unknown; value?: unknown }[]) {
      if (!Array.isArray(op?.path) || !("value" in (op ?? {}))) continue;
      const opPath = op.path as (string | number)[];
      if (opPath.length > path.length || opPath.some((step, index) => step !== path[index])) continue;
      let value: unknown = op.value;
      for (const step of path.slice(opPath.length))
        value = (value as Record<string | number, unknown> | null)?.[step];
      return { found: true, value };
    }
    return { found: false };
  }
  const payload = (first as { payload?: unknown } | null)?.payload;
  if (typeof payload !== "object" || payload === null || path.length === 0) return { found: false };
  let value: unknown = payload;
  for (const step of path) {
    if (typeof value !== "object" || value === null || !Object.hasOwn(value, step)) return { found: false };
    value = (value as Record<string | number, unknown>)[step];
  }
  return { found: true, value };
}

/** A refused write's issues, each with the shape of the value the write gave at its path. */
function withValueShapes(error: unknown, args: readonly unknown[]): unknown {
  if (!DocScriptError.isInstance(error) || error.issues.length === 0) return error;
  const issues = error.issues.map((issue) => {
    const given = valueAt(args, issue.path);
    return given.found ? { ...issue, value: valueShape(given.value) } : issue;
  });
  return new DocScriptError(error.code as DocScriptErrorCode, error.message, issues);
}

function refused(code: DocScriptErrorCode, message: string, issues: DocumentIssue[] = []): DocScriptError {
  return new DocScriptError(code, message, issues);
}

export function openRunSession(
  input: RunSessionInput,
  schema: Schema,
  document: RunDocument,
  host: RunSessionHost,
): RunSession {
  const { doc, base, source, warnings = [] } = document;
  const baseVersion = doc.oplogVersion();
  doc.setPeerId(input.peerId as `${number}`);
  const remote = remoteRowsOf(base);
  /**
   * Ids made by a call that was asked again (it lacked rows): the next asking makes the same ones, so
   * what was looked up for them is what it needs.
   */
  const madeIds: { kind: string; id: string }[] = [];
  let madeUsed = 0;
  const createId = (kind: string) => {
    const made = madeIds[madeUsed];
    if (made !== undefined && made.kind === kind) {
      madeUsed += 1;
      return made.id;
    }
    const id = `${kind}-${randomBytes(9).toString("base64url").slice(0, 12)}`;
    madeIds.splice(madeUsed, madeIds.length - madeUsed, { kind, id });
    madeUsed += 1;
    return id;
  };
  // Starts from an overlay of the base projection: nothing the run writes reaches `base`.
  const session = openDocument(doc, schema, { role: "script", projection: base, createId });

  /**
   * Runs `work` until its projection lacks nothing (ADR 0466): a read is asked again after each fill;
   * a write that lacked rows threw `RowsNeeded` without landing, and one that returned has landed.
   */
  const filled = async <T>(work: () => T, landing: boolean): Promise<T> => {
    if (remote === undefined) return work();
    for (let round = 0; ; round++) {
      madeUsed = 0;
      try {
        const value = work();
        if (landing || !remote.lacking) {
          remote.missing.clear();
          madeIds.length = 0;
          return value;
        }
      } catch (error) {
        if (!(error instanceof RowsNeeded) && !remote.lacking) {
          madeIds.length = 0;
          throw error;
        }
      }
      if (round >= maxFillRounds)
        throw refused(
          "document_unavailable",
          `the call still lacked rows after ${maxFillRounds} reads from the server`,
        );
      await remote.fill();
    }
  };
  const inBase = (entityId: string) => base.claimsOf(entityId).length > 0;
  /** The last state of each relation the plan linked or moved, for the preview. */
  const relationStates = new Map<string, Relation>();
  const created = new Set<string>();
  const updated = new Set<string>();
  const deleted = new Set<string>();
  const linked = new Set<string>();
  const moved = new Set<string>();
  const unlinked = new Set<string>();
  /** Relations a delete took with it, with the entity whose delete did. */
  const cascaded = new Map<string, Relation & { by: string }>();
  const pendingUploads = new Map<string, { field: string; text: string }>();
  let writes = 0;

  /** A phonetic script's phoneme text is stored by the host; the row holds null until the plan is built. */
  const takeUploads = (
    entityKind: string,
    entityId: string | undefined,
    payload: Record<string, unknown>,
  ) => {
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
  };

  /** A file a new entity names must have a key the host's store can take as a plain relative name. */
  const checkFileKey = (entityKind: string, payload: Record<string, unknown>) => {
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
  };

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
      const upload = takeUploads(raw.entityKind, undefined, payload);
      const entity = session.entities.create({
        entityKind: raw.entityKind,
        payload,
        ...(raw.variantOf === undefined ? {} : { variantOf: raw.variantOf }),
      });
      if (!inBase(entity.entityId) && !created.has(entity.entityId)) {
        created.add(entity.entityId);
        writes++;
      }
      if (upload !== undefined) pendingUploads.set(entity.entityId, upload);
      return scriptEntity(entity);
    },
    update(entityId: string, ops: SessionUpdateOp[]) {
      const current = session.entities.get(entityId);
      if (current === undefined) return scriptEntity(session.entities.update(entityId, ops));
      let upload: { field: string; text: string } | undefined;
      const field = uploadedTextFields[current.entityKind];
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
              upload = takeUploads(current.entityKind, entityId, payload);
              return { ...op, value: payload[field] };
            }
            return op;
          })
        : ops;
      const entity = session.entities.update(entityId, rewritten);
      if (upload !== undefined) pendingUploads.set(entityId, upload);
      if (!created.has(entityId)) updated.add(entityId);
      writes++;
      return scriptEntity(entity);
    },
    updateMany(updates: { entityId: string; ops: SessionUpdateOp[] }[]) {
      const count = updateMany(session, updates, uploadedTextFields, maxReadItems);
      for (const { entityId } of updates) if (!created.has(entityId)) updated.add(entityId);
      writes += count;
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
      // What the delete takes with it, for the preview: every relation touching it (clips taken off a
      // deleted track) and an entity embedded in its row (a clip's marker). Read before it lands.
      const touching = typeof entityId === "string" ? session.relations.list({ entityId }) : [];
      const embedded = touching
        .filter((relation) => relation.relationId.startsWith(`${entityId}#`))
        .map((relation) => relation.endpoint1EntityId)
        .filter((id) => schema.embeddedKinds.has(session.entities.get(id)?.entityKind ?? ""));
      session.entities.delete(entityId);
      writes++;
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
    },
  } satisfies SyncEntities;

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
    of(entityId: string, relationKind?: string) {
      if (typeof entityId !== "string") return session.relations.of(entityId, relationKind);
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
      writes++;
      return relation;
    },
    move(relationId: string, target: { endpoint0EntityId?: string; index?: number }) {
      const relation = session.relations.move(relationId, target ?? {});
      relationStates.set(relation.relationId, relation);
      if (!linked.has(relation.relationId)) moved.add(relation.relationId);
      writes++;
      return relation;
    },
    unlink(relationId: string) {
      session.relations.unlink(relationId);
      writes++;
      moved.delete(relationId);
      if (!linked.delete(relationId)) unlinked.add(relationId);
    },
  } satisfies SyncRelations;

  const entitiesMatch: SignaturesMatch<typeof entities, SyncEntities> = true;
  const relationsMatch: SignaturesMatch<typeof relations, SyncRelations> = true;
  void entitiesMatch;
  void relationsMatch;

  const bindings: Record<string, Record<string, (...args: never[]) => unknown>> = { entities, relations };

  /** Reads each stored file the plan names anew or changes, and records the facts where none are stated. */
  const recordFileFacts = async (hostSession: () => DocumentSession): Promise<void> => {
    for (const entityId of [...created, ...updated]) {
      const entity = await filled(() => session.entities.get(entityId), false);
      if (entity === undefined || !storedFileKinds.has(entity.entityKind) || fileOf(entity) === undefined)
        continue;
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
  };

  const storeUploads = async (hostSession: () => DocumentSession): Promise<void> => {
    for (const [entityId, upload] of pendingUploads) {
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
  };

  /**
   * The issues the plan adds (ADR 0451): the document's issues within everything the plan's writes could
   * have changed (the host's recorded file facts included), less those the base already had there.
   * Outside that scope the document reads as the base did, so this equals the whole-document check's
   * difference without reading every entity.
   */
  const planIssues = (): DocumentIssue[] => {
    const scope = session.changedScope();
    const issues = session.check(scope);
    if (issues.length === 0) return issues;
    const before = new Set(checkDocument(base, scope).map(issueKey));
    return issues.filter((issue) => !before.has(issueKey(issue)));
  };

  /** The fields an update changed, base → plan, dotted paths into records; long values elided. */
  const fieldChanges = (entityId: string, after: SessionEntity): FieldChange[] => {
    const before = base.entity(entityId);
    const changes: FieldChange[] = [];
    const walk = (path: string[], left: unknown, right: unknown) => {
      if (JSON.stringify(left) === JSON.stringify(right)) return;
      const isRecord = (value: unknown): value is Record<string, unknown> =>
        typeof value === "object" && value !== null && !Array.isArray(value);
      if (isRecord(left) && isRecord(right) && path.length < 4) {
        for (const key of new Set([...Object.keys(left), ...Object.keys(right)]))
          walk([...path, key], left[key], right[key]);
        return;
      }
      changes.push({
        path: path.join("."),
        before: left === undefined ? null : elide(left),
        after: right === undefined ? null : elide(right),
      });
    };
    walk([], before?.payload ?? {}, after.payload);
    return changes;
  };

  const preview = (): PlanPreview => {
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
              fields: fieldChanges(id, entity),
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
    const unreferenced = new Set<string>();
    for (const id of deleted) {
      for (const relation of base.relationsOf(id)) {
        for (const other of [relation.endpoint0EntityId, relation.endpoint1EntityId]) {
          if (other === id || deleted.has(other) || unreferenced.size >= 50) continue;
          if (session.entities.get(other) !== undefined && session.relations.of(other).length === 0)
            unreferenced.add(other);
        }
      }
    }
    return {
      writes,
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
  };

  /** The calls that write: asked again only while they throw `RowsNeeded`. */
  const writing = new Set(["create", "update", "updateMany", "delete", "link", "move", "unlink"]);

  /** Once the script has ended, the session answers nothing more. */
  let ended = false;
  const open = () => {
    if (ended) throw refused("run_ended", "the run has ended");
  };

  return {
    call(binding, method, args) {
      open();
      const methods = Object.hasOwn(bindings, binding) ? bindings[binding] : undefined;
      const implementation =
        methods !== undefined && Object.hasOwn(methods, method) ? methods[method] : undefined;
      if (implementation === undefined)
        throw refused("unknown_call", `${binding}.${method} is not part of the contract`);
      try {
        return (implementation as (...values: unknown[]) => unknown)(...args);
      } catch (error) {
        throw withValueShapes(error, args);
      }
    },
    callFilled(binding, method, args) {
      return filled(() => this.call(binding, method, args), writing.has(method));
    },
    async callAsync(binding, method, args) {
      open();
      if (binding !== "entities" || method !== "materialize")
        throw refused("unknown_call", `${binding}.${method} is not part of the contract`);
      const entityId = args[0];
      const entity =
        typeof entityId === "string" ? await filled(() => session.entities.get(entityId), false) : undefined;
      if (entity === undefined) throw refused("entity_not_found", `no entity ${String(entityId)}`);
      const file = fileOf(entity);
      if (file === undefined)
        throw refused("not_a_file", `${entityId} is a ${entity.entityKind} and names no stored file`);
      if (!input.hooks.loadEntityAsset)
        throw refused(
          "materialize_unavailable",
          "this host offers no loadEntityAsset, so files cannot be read",
        );
      const loaded = (await host.call("loadEntityAsset", { entity })) as { content?: unknown };
      return { assetId: file.key, content: loaded?.content ?? null };
    },
    async finish(outcome: ScriptOutcome): Promise<EditScriptPlanBody> {
      open();
      ended = true;
      // The sandbox reports its own codes or the code of a DocScriptError the script caused.
      if (!outcome.ok) throw refused(outcome.error.code as DocScriptErrorCode, outcome.error.message);
      let host: DocumentSession | undefined;
      const hostSession = () => {
        host ??= session.asHost();
        return host;
      };
      await storeUploads(hostSession);
      await recordFileFacts(hostSession);
      if (remote?.movedTo !== undefined)
        throw refused(
          "document_changed",
          "the document changed on the server while the run read it (another client committed): run the script again",
        );
      const issues = await filled(planIssues, false);
      if (issues.length > 0) throw DocScriptError.fromIssues("plan_refused", issues);
      doc.commit({
        message: JSON.stringify({ planId: input.planId, actor: input.actor ?? null }),
        origin: "docscript-plan",
      });
      const update = doc.export({ mode: "update", from: baseVersion });
      const createdFileKeys = (await filled(() => [...created].map((id) => session.entities.get(id)), false))
        .filter(
          (entity) =>
            entity !== undefined &&
            storedFileKinds.has(entity.entityKind) &&
            entity.entityKind !== "audio-script",
        )
        .map((entity) => (entity === undefined ? undefined : fileOf(entity)?.key))
        .filter((key): key is string => key !== undefined);
      return {
        update,
        preview: await filled(preview, false),
        createdFileKeys,
        documentSource: source,
        documentWarnings: warnings,
      };
    },
  };
}
