/**
 * `modelSchema`: a tool input schema that validates with the full zod schema but shows the model a
 * compact JSON Schema — types, enums, required fields and descriptions, without the defaults,
 * patterns, length and range bounds the service checks anyway (a refused value comes back as a typed
 * `invalid_input` error naming the field). The 27 definitions fit in 3k tokens this way (bench/memory).
 */
import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@tackle/core";
import { z } from "zod";

type JsonValue = unknown;

const dropped = new Set([
  "$schema",
  "pattern",
  "minLength",
  "maxLength",
  "format",
  "propertyNames",
  "additionalProperties",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
  "default",
  "exclusiveMinimum",
  "exclusiveMaximum",
]);

/** The JSON Schema without the keywords a model does not need to call the tool right. */
export function compactJsonSchema(schema: JsonValue): JsonValue {
  if (Array.isArray(schema)) return schema.map(compactJsonSchema);
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (dropped.has(key)) continue;
    if (key === "properties" && typeof value === "object" && value !== null) {
      out[key] = Object.fromEntries(
        Object.entries(value).map(([name, property]) => [name, compactJsonSchema(property)]),
      );
      continue;
    }
    out[key] = compactJsonSchema(value);
  }
  return out;
}

export function modelSchema<S extends z.ZodType>(
  schema: S,
): StandardSchemaV1<z.input<S>, z.output<S>> & StandardJSONSchemaV1<z.input<S>, z.output<S>> {
  const compact = compactJsonSchema(z.toJSONSchema(schema, { io: "input" })) as Record<string, unknown>;
  const describe = () => structuredClone(compact);
  return {
    "~standard": {
      version: 1,
      vendor: "zod",
      validate: (value: unknown) =>
        (schema as unknown as StandardSchemaV1<z.input<S>, z.output<S>>)["~standard"].validate(value),
      jsonSchema: { input: describe, output: describe },
    },
  } as StandardSchemaV1<z.input<S>, z.output<S>> & StandardJSONSchemaV1<z.input<S>, z.output<S>>;
}
