/** `entities.declareFields`: an entity kind's field specs as plain declarations a script can read. */
import type { FieldSpec } from "../schema/field.ts";
import type { FieldDeclaration, Json } from "./script-api.ts";

export function declareFields(fields: Readonly<Record<string, FieldSpec>>): FieldDeclaration[] {
  return Object.entries(fields).map(([name, spec]) => declareField(name, spec));
}

function declareField(name: string, spec: FieldSpec): FieldDeclaration {
  const record = spec as unknown as Record<string, unknown>;
  const declaration: Record<string, unknown> = {
    name,
    type: spec.type,
    nullable: spec.nullable === true,
    optional: spec.optional === true,
    hostOnly: spec.hostOnly === true,
    fixed: spec.fixed === true,
  };
  for (const key of ["default", "enum", "integer", "min", "max", "maxLength", "description"] as const) {
    if (record[key] !== undefined) declaration[key] = record[key] as Json;
  }
  if (spec.type === "list") declaration.items = declareField("item", spec.items);
  if (spec.type === "record") declaration.fields = declareFields(spec.fields);
  return declaration as unknown as FieldDeclaration;
}
