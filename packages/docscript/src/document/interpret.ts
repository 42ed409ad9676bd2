/** Interpret: a Loro document → the entities and relations it projects to, with the issues it has. */
import type { LoroDoc, LoroMap } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import { checkDocument } from "./check-document.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import { compareRelations, Projection, publicRelation } from "./projection.ts";

/** The whole document's projection, read in one pass. */
export function projectDocument(doc: LoroDoc, schema: Schema): Projection {
  const projection = new Projection(schema);
  const entities = doc.getMap(ENTITIES).toJSON() as Record<string, unknown>;
  for (const [rowId, json] of Object.entries(entities)) projection.setRow(rowId, json);
  const relations = doc.getMap(RELATIONS).toJSON() as Record<string, unknown>;
  for (const [relationId, json] of Object.entries(relations)) projection.setRelationRow(relationId, json);
  return projection;
}

export interface InterpretedDocument {
  readonly entities: Entity[];
  readonly relations: Relation[];
  /** Empty when the document projects cleanly. */
  readonly issues: DocumentIssue[];
}

/** Every entity (sorted by id) and relation (in order), and every issue of the whole document. */
export function interpretDocument(doc: LoroDoc, schema: Schema): InterpretedDocument {
  const projection = projectDocument(doc, schema);
  const entities = [...projection.entities()].sort((left, right) =>
    left.entityId < right.entityId ? -1 : 1,
  );
  const relations = [...projection.relationIds()]
    .map((relationId) => projection.storedRelation(relationId))
    .filter((relation) => relation !== undefined)
    .sort(compareRelations)
    .map(publicRelation);
  return { entities, relations, issues: checkDocument(projection) };
}

/** Re-reads the rows a change touched, in place. */
export function refreshRows(
  projection: Projection,
  doc: LoroDoc,
  rows: { entities: Iterable<string>; relations: Iterable<string> },
): void {
  const entities = doc.getMap(ENTITIES);
  for (const rowId of rows.entities) projection.setRow(rowId, readContainer(entities, rowId));
  const relations = doc.getMap(RELATIONS);
  for (const relationId of rows.relations)
    projection.setRelationRow(relationId, readContainer(relations, relationId));
}

function readContainer(map: LoroMap, key: string): unknown {
  const value = map.get(key) as unknown;
  if (value === undefined) return undefined;
  if (
    typeof value === "object" &&
    value !== null &&
    "toJSON" in value &&
    typeof value.toJSON === "function"
  ) {
    return value.toJSON();
  }
  return value;
}
