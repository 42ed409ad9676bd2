/**
 * Where entities and relations live in a Loro document (docs/docscript-loro-mapping.md is the long form).
 * Root map `entities`: entity id → row map { kind, variantOf?, fields: map, slots?: map }.
 * Root map `relations`: relation id → map { kind, endpoint0, endpoint1, position? }.
 * A slot holds a target id, or (embedded) the target's whole row { id, kind, fields }.
 */
export const ENTITIES = "entities";
export const RELATIONS = "relations";
export const META = "meta";

export const ROW_KIND = "kind";
export const ROW_VARIANT_OF = "variantOf";
export const ROW_FIELDS = "fields";
export const ROW_SLOTS = "slots";
export const EMBEDDED_ID = "id";

export const RELATION_KIND = "kind";
export const RELATION_ENDPOINT0 = "endpoint0";
export const RELATION_ENDPOINT1 = "endpoint1";
export const RELATION_POSITION = "position";

/** The id of the relation a slot projects to: one per holder and slot. */
export function slotRelationId(holderId: string, slotName: string): string {
  return `${holderId}#${slotName}`;
}
