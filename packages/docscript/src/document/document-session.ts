/**
 * Compile: a session over a LoroDoc (a fork, in the tool) whose writes become document mutations.
 * Each write is checked before it lands and lands whole or not at all; `check()` is the whole-document
 * check a plan must pass. Reads return copies: changing them changes nothing. The session is put
 * together here from its shared context (`session-context.ts`), its entity writes
 * (`session-entities.ts`) and its relation writes (`session-relations.ts`).
 */
import type { LoroDoc } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { changeScope, checkDocument } from "./check-document.ts";
import { createSessionContext } from "./session-context.ts";
import { sessionEntities } from "./session-entities.ts";
import { sessionRelations } from "./session-relations.ts";
import type { DocumentSession, DocumentSessionOptions } from "./session-types.ts";

export type {
  CreateEntityInput,
  DocumentSession,
  DocumentSessionOptions,
  EntityFilter,
  FieldRange,
  LinkInput,
  MoveTarget,
  OrderedEnd,
  RelationFilter,
} from "./session-types.ts";

/** Opens a session over `doc`; the document is read once, then kept in step with each write. */
export function openDocument(
  doc: LoroDoc,
  schema: Schema,
  options: DocumentSessionOptions = {},
): DocumentSession {
  const context = createSessionContext(doc, schema, options);
  const { projection, changed, state } = context;
  const session: DocumentSession = {
    doc,
    schema,
    entities: sessionEntities(context),
    relations: sessionRelations(context),
    check(scope) {
      return checkDocument(projection, scope);
    },
    changedScope() {
      const entityIds = new Set(changed.entityIds);
      const relationIds = new Set(changed.relationIds);
      const invariantEntityIds = new Set(changed.invariantEntityIds);
      if (changed.fieldRows.size > 0) {
        const reach = changeScope(projection, { entities: changed.fieldRows, relations: [] });
        for (const entityId of reach.entityIds) {
          entityIds.add(entityId);
          invariantEntityIds.add(entityId);
        }
        for (const relationId of reach.relationIds) relationIds.add(relationId);
      }
      return { entityIds, relationIds, invariantEntityIds };
    },
    asHost() {
      const asHost = <Method extends (...args: never[]) => unknown>(method: Method): Method =>
        ((...args: Parameters<Method>) => {
          const previous = state.role;
          state.role = "host";
          try {
            return method(...args);
          } finally {
            state.role = previous;
          }
        }) as Method;
      const entities = session.entities;
      const relations = session.relations;
      const host: DocumentSession = {
        ...session,
        entities: {
          ...entities,
          create: asHost(entities.create),
          update: asHost(entities.update),
          updateMany: asHost(entities.updateMany),
          delete: asHost(entities.delete),
        },
        relations: {
          ...relations,
          link: asHost(relations.link),
          move: asHost(relations.move),
          unlink: asHost(relations.unlink),
        },
        asHost: () => host,
      };
      return host;
    },
    assertValid() {
      const issues = checkDocument(projection);
      if (issues.length > 0) throw DocScriptError.fromIssues("document_invalid", issues);
    },
  };
  return session;
}
