/**
 * A host worker's first run compiles the run's code as it goes: the first call after a large commit,
 * run by the worker that replaced the outgrown one (ADR 0510), took ~30-45 ms more than on a worker
 * that had run before (a delete at 100k entities: 100-127 ms against 65-77). A worker that holds its
 * document rehearses a run once, between runs, on an empty document of its own: every binding the
 * script API offers, its checks and its plan, on nothing the tool keeps or the server sees.
 */
import { LoroDoc } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { createDocumentCache } from "./document-cache.ts";
import { openRunSession, type RunSession } from "./run-session.ts";

/** The rehearsal's document and plan: a key no tool call uses, a plan no server receives. */
const rehearsalKey = "\u0000docscript-rehearsal";

/**
 * Runs one rehearsal on `schema`: creates an entity of each kind with an empty payload (a kind whose
 * fields are required refuses it, which is a path too), reads, updates, links, unlinks and deletes
 * what it made, and asks for the plan. Whatever a step throws is the step's answer: a rehearsal never
 * fails its worker. Answers the steps that succeeded (`binding.method`, and `finish` for the plan).
 */
export async function rehearseRun(schema: Schema): Promise<ReadonlySet<string>> {
  const done = new Set<string>();
  const cache = createDocumentCache();
  const checkedOut = cache.checkout(rehearsalKey, new LoroDoc(), schema, { documents: 1 });
  try {
    const session = openRunSession(
      {
        docId: rehearsalKey,
        planId: "plan_rehearsal",
        peerId: "1",
        hooks: { loadEntityAsset: false, uploadText: false },
      },
      schema,
      checkedOut.document,
      { call: async () => Promise.reject(new Error("a rehearsal asks the host nothing")) },
    );
    await rehearse(session, schema, done);
    await session.finish({ ok: true }).then(
      () => done.add("finish"),
      () => undefined,
    );
  } catch {
    // A step the rehearsal could not take: the run it stands for would have met it too.
  } finally {
    checkedOut.release();
  }
  return done;
}

async function rehearse(session: RunSession, schema: Schema, done: Set<string>): Promise<void> {
  const step = async (binding: string, method: string, ...args: unknown[]): Promise<unknown> => {
    try {
      const answer = await session.callFilled(binding, method, args);
      done.add(`${binding}.${method}`);
      return answer;
    } catch {
      return undefined;
    }
  };
  const made: string[] = [];
  for (const entityKind of Object.keys(schema.entities).slice(0, 8)) {
    const entity = (await step("entities", "create", { entityKind, payload: {} })) as
      | { entityId: string; payload: Record<string, unknown> }
      | undefined;
    if (entity === undefined) continue;
    made.push(entity.entityId);
    const [field, value] = Object.entries(entity.payload)[0] ?? [];
    if (field !== undefined)
      await step("entities", "update", entity.entityId, [{ op: "set", path: [field], value }]);
    await step("entities", "updateMany", [{ entityId: entity.entityId, ops: [] }]);
  }
  const [first, second] = made;
  await step("entities", "list", { limit: 10 });
  await step("entities", "get", first ?? "none");
  for (const relationKind of Object.keys(schema.relations).slice(0, 4)) {
    if (first === undefined || second === undefined) break;
    const relation = (await step("relations", "link", {
      relationKind,
      endpoint0EntityId: first,
      endpoint1EntityId: second,
    })) as { relationId: string } | undefined;
    await step("relations", "of", first);
    await step("relations", "list", { relationKind, limit: 10 });
    if (relation !== undefined) await step("relations", "unlink", relation.relationId);
  }
  for (const entityId of made.reverse()) await step("entities", "delete", entityId);
}
