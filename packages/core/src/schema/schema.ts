/** The schema types a tool accepts: any Standard Schema that can also state itself as JSON Schema. */
import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@standard-schema/spec";
import type { ValidationIssue } from "../errors/invalid-input-error.ts";

export type { StandardJSONSchemaV1, StandardSchemaV1 };

/** A JSON Schema object (draft 2020-12). */
export type JsonSchema = Record<string, unknown>;

/** A schema a tool can use: validates (Standard Schema) and describes itself (Standard JSON Schema). Zod 4 is one. */
export type ToolSchema<Input = unknown, Output = Input> = StandardSchemaV1<Input, Output> &
  StandardJSONSchemaV1<Input, Output>;

export type ValidationResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly issues: readonly ValidationIssue[] };

/** Runs a Standard Schema and turns its issues into plain `{ path, message }` records. */
export async function validateWith<T>(
  schema: StandardSchemaV1<unknown, T>,
  value: unknown,
): Promise<ValidationResult<T>> {
  return validateNow(schema, value);
}

/**
 * As `validateWith`, but without a promise when the schema validates synchronously (zod's object
 * schemas do): a tool call is then checked without waiting a turn.
 */
export function validateNow<T>(
  schema: StandardSchemaV1<unknown, T>,
  value: unknown,
): ValidationResult<T> | Promise<ValidationResult<T>> {
  const result = schema["~standard"].validate(value);
  return result instanceof Promise ? result.then(toValidationResult) : toValidationResult(result);
}

function toValidationResult<T>(result: StandardSchemaV1.Result<T>): ValidationResult<T> {
  if (result.issues === undefined) return { ok: true, value: result.value };
  return {
    ok: false,
    issues: result.issues.map((issue) => ({
      path: (issue.path ?? []).map((segment) => {
        const key = typeof segment === "object" ? segment.key : segment;
        return typeof key === "number" ? key : String(key);
      }),
      message: issue.message,
    })),
  };
}

/** The JSON Schema of what a schema accepts (its input side), as generated: `$schema` and all of 2020-12 kept. */
export function toJsonSchema(schema: StandardJSONSchemaV1, side: "input" | "output" = "input"): JsonSchema {
  const converter = schema["~standard"].jsonSchema;
  return converter[side]({ target: "draft-2020-12" });
}

export interface JsonSchemaOptions<T> {
  /** Checks a value; return issues to refuse it. Without it every value is accepted as is (the far side validates). */
  readonly validate?: (value: unknown) => readonly ValidationIssue[] | undefined;
  /** Only carries the TypeScript type. */
  readonly type?: T;
}

/**
 * A tool schema from a plain JSON Schema: for tools whose schema arrives over a wire
 * (an MCP server's tools, a stdio child's), where the far side does the validating.
 */
export function jsonSchema<T = unknown>(
  schema: JsonSchema,
  options: JsonSchemaOptions<T> = {},
): ToolSchema<T> {
  const describe = () => structuredClone(schema);
  return {
    "~standard": {
      version: 1,
      vendor: "tackle",
      validate(value: unknown) {
        const issues = options.validate?.(value);
        if (issues !== undefined && issues.length > 0)
          return { issues: issues.map((issue) => ({ ...issue })) };
        return { value: value as T };
      },
      jsonSchema: { input: describe, output: describe },
    },
  };
}

/**
 * The schema as a model provider gets it: without the `$schema` dialect tag, which function-calling
 * APIs do not take (MCP keeps it; see `toJsonSchema`).
 */
export function withoutDialect(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}
