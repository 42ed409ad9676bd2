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
import { type DocumentSession, openDocument } from "../document/document-session.ts";
import { demandOf } from "../document/on-demand-projection.ts";
import { type Projection, RowsNeeded } from "../document/projection.ts";
import { maxFillRounds, type RowsOnDemand } from "../document/rows-on-demand.ts";
import type { ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError, type DocScriptErrorCode } from "../schema/docscript-error.ts";
import { type PlanPreview, unchangedPreview } from "./plan-preview.ts";
import { newTally, scriptBindings } from "./run-bindings.ts";
import { planSteps } from "./run-plan.ts";
import { runStaging, type StagePart } from "./run-staging.ts";
import { fileOf, storedFileKinds } from "./stored-files.ts";
import { refused, withValueShapes } from "./value-shapes.ts";

/** What a run's session is opened with. */
export interface RunSessionInput {
  readonly docId: string;
  readonly planId: string;
  readonly actor?: string;
  /** The fresh Loro peer this run authors its plan on (a decimal string). */
  readonly peerId: string;
  readonly hooks: { readonly loadEntityAsset: boolean; readonly uploadText: boolean };
  /** How long a large run stages its writes ahead of its push (ADR 0508); `stageForMs` by default. */
  readonly stageForMs?: number;
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
  /**
   * Runs a read of the document's rows from the server (a fill of rows on demand, ADR 0466): the host
   * worker credits what it grows by to the document, not the run (ADR 0481).
   */
  reading?<T>(work: () => Promise<T>): Promise<T>;
  /** Hands the server a part of the run's update ahead of its push (ADR 0508); none: never staged. */
  stage?: StagePart;
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

export { valueShape } from "./value-shapes.ts";

/**
 * How a run's calls meet a projection that reads rows on demand (ADR 0466): `filled` runs a call until
 * the projection lacks nothing (a read is asked again after each fill; a write that lacked rows threw
 * `RowsNeeded` without landing, and one that returned has landed), and `createId` makes, on each
 * asking again, the ids the first asking made, so what was looked up for them is what it needs. Over
 * a projection holding every row, a call runs once.
 */
function askedUntilFilled(
  remote: RowsOnDemand | undefined,
  reading: <T>(work: () => Promise<T>) => Promise<T>,
): {
  createId: (kind: string) => string;
  filled: <T>(work: () => T, landing: boolean) => Promise<T>;
} {
  const madeIds: { kind: string; id: string }[] = [];
  let madeUsed = 0;
  const createId = (kind: string) => {
    const made = madeIds[madeUsed];
    if (made !== undefined && made.kind === kind) {
      madeUsed += 1;
      return made.id;
    }
    const id = `${kind}-${randomBytes(9).toString("base64url").slice(0, 12)}`;
    remote?.made(id);
    madeIds.splice(madeUsed, madeIds.length - madeUsed, { kind, id });
    madeUsed += 1;
    return id;
  };
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
      await reading(() => remote.fill());
    }
  };
  return { createId, filled };
}

type Filled = ReturnType<typeof askedUntilFilled>["filled"];

/** `entities.materialize(entityId)`: the stored file the entity names, as the host's hook loads it. */
async function materialized(
  input: RunSessionInput,
  host: RunSessionHost,
  session: DocumentSession,
  filled: Filled,
  entityId: unknown,
): Promise<{ assetId: string; content: unknown }> {
  const entity =
    typeof entityId === "string" ? await filled(() => session.entities.get(entityId), false) : undefined;
  if (entity === undefined)
    throw DocScriptError.notFound("entity", String(entityId), `no entity ${String(entityId)}`);
  const file = fileOf(entity);
  if (file === undefined)
    throw refused("not_a_file", `${entityId} is a ${entity.entityKind} and names no stored file`);
  if (!input.hooks.loadEntityAsset)
    throw refused("materialize_unavailable", "this host offers no loadEntityAsset, so files cannot be read");
  const loaded = (await host.call("loadEntityAsset", { entity })) as { content?: unknown };
  return { assetId: file.key, content: loaded?.content ?? null };
}

/** The keys of the stored files among the entities the run created (an audio script's aside). */
async function createdFileKeysOf(
  session: DocumentSession,
  created: Iterable<string>,
  filled: Filled,
): Promise<string[]> {
  return (await filled(() => [...created].map((id) => session.entities.get(id)), false))
    .filter(
      (entity) =>
        entity !== undefined &&
        storedFileKinds.has(entity.entityKind) &&
        entity.entityKind !== "audio-script",
    )
    .map((entity) => (entity === undefined ? undefined : fileOf(entity)?.key))
    .filter((key): key is string => key !== undefined);
}

/** The calls that write: asked again only while they throw `RowsNeeded`. */
const writing = new Set(["create", "update", "updateMany", "delete", "link", "move", "unlink"]);

export function openRunSession(
  input: RunSessionInput,
  schema: Schema,
  document: RunDocument,
  host: RunSessionHost,
): RunSession {
  const { doc, base, source, warnings = [] } = document;
  const baseVersion = doc.oplogVersion();
  doc.setPeerId(input.peerId as `${number}`);
  const remote = demandOf(base);
  if (remote !== undefined) remote.readsAhead = true;
  const planCommit = {
    message: JSON.stringify({ planId: input.planId, actor: input.actor ?? null }),
    origin: "docscript-plan",
  };
  const staging = runStaging(doc, host.stage, planCommit, undefined, input.stageForMs);
  const { createId, filled } = askedUntilFilled(remote, (work) => host.reading?.(work) ?? work());
  // Starts from an overlay of the base projection: nothing the run writes reaches `base`.
  const session = openDocument(doc, schema, { role: "script", projection: base, createId });
  const tally = newTally();
  const { created } = tally;
  const bindings = scriptBindings(input, schema, session, base, tally);
  const { recordFileFacts, storeUploads, planIssues, preview } = planSteps({
    input,
    host,
    session,
    base,
    tally,
    filled,
  });

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
    async callFilled(binding, method, args) {
      if (!writing.has(method)) return filled(() => this.call(binding, method, args), false);
      const value = await filled(() => this.call(binding, method, args), true);
      staging.afterWrite();
      return value;
    },
    async callAsync(binding, method, args) {
      open();
      if (binding !== "entities" || method !== "materialize")
        throw refused("unknown_call", `${binding}.${method} is not part of the contract`);
      return materialized(input, host, session, filled, args[0]);
    },
    async finish(outcome: ScriptOutcome): Promise<EditScriptPlanBody> {
      open();
      ended = true;
      staging.stop(outcome.ok);
      // The script's calls are over: what the run still reads, its end checks ask for themselves.
      if (remote !== undefined) remote.readsAhead = false;
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
      doc.commit(planCommit);
      const update = doc.export({ mode: "update", from: baseVersion });
      const createdFileKeys = await createdFileKeysOf(session, created, filled);
      // Writes of the values already held leave no operation: such a plan says it changes nothing.
      const unchanged = doc.oplogVersion().compare(baseVersion) === 0;
      return {
        update,
        preview: unchanged ? unchangedPreview(tally.writes) : await filled(preview, false),
        createdFileKeys,
        documentSource: source,
        documentWarnings: warnings,
      };
    },
  };
}
