/** Interpret: a Loro document → the entities and relations it projects to, with the issues it has. */
import { isContainer, type LoroDoc, LoroMap } from "loro-crdt";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentIssue, Entity, Relation } from "../schema/types.ts";
import { checkDocument } from "./check-document.ts";
import { type ContainerIndex, indexContainers } from "./container-index.ts";
import { ENTITIES, RELATIONS } from "./layout.ts";
import { Projection } from "./projection.ts";
import { compareRelations, publicRelation } from "./row-shape.ts";

/** The whole document's projection, read in one pass; with `index`, every container is recorded in it. */
export function projectDocument(doc: LoroDoc, schema: Schema, index?: ContainerIndex): Projection {
  const projection = new Projection(schema);
  const read = (root: string): Record<string, unknown> => {
    const map = doc.getMap(root);
    if (index !== undefined)
      for (const [rowId, value] of map.entries()) {
        if (!isContainer(value)) continue;
        indexContainers(value, index, { root, rowId });
        value.free();
      }
    return map.toJSON() as Record<string, unknown>;
  };
  for (const [rowId, json] of Object.entries(read(ENTITIES))) projection.setRow(rowId, json);
  for (const [relationId, json] of Object.entries(read(RELATIONS)))
    projection.setRelationRow(relationId, json);
  projection.readAt = versionKey(doc);
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
  const entities = [...projection.entities()]
    .sort((left, right) => (left.entityId < right.entityId ? -1 : 1))
    .map((entity) => ({ ...entity, payload: structuredClone(entity.payload) }));
  const relations = [...projection.relationIds()]
    .map((relationId) => projection.storedRelation(relationId))
    .filter((relation) => relation !== undefined)
    .sort(compareRelations)
    .map(publicRelation);
  return { entities, relations, issues: checkDocument(projection) };
}

/** Re-reads the rows a change touched, in place; with `index`, their containers are recorded in it. */
export function refreshRows(
  projection: Projection,
  doc: LoroDoc,
  rows: { entities: Iterable<string>; relations: Iterable<string> },
  index?: ContainerIndex,
): void {
  const entities = doc.getMap(ENTITIES);
  for (const rowId of rows.entities) projection.setRow(rowId, readRow(entities, ENTITIES, rowId, index));
  const relations = doc.getMap(RELATIONS);
  for (const relationId of rows.relations)
    projection.setRelationRow(relationId, readRow(relations, RELATIONS, relationId, index));
}

function readRow(map: LoroMap, root: string, rowId: string, index: ContainerIndex | undefined): unknown {
  const value = map.get(rowId) as unknown;
  if (!(value instanceof LoroMap)) return value;
  if (index !== undefined) indexContainers(value, index, { root, rowId });
  return value.toJSON();
}

/** A key for the document's current state: its frontiers. */
export function versionKey(doc: LoroDoc): string {
  return JSON.stringify(
    doc
      .frontiers()
      .map((id) => `${id.counter}@${id.peer}`)
      .sort(),
  );
}
