/** A schema that cannot be used: thrown by `defineSchema`, listing every problem. */
import { hasBrand, setBrand } from "@tackle/core/internal";

const schemaDefinitionErrorBrand = Symbol.for("tackle.docscript.schema-definition-error");

/**
 * `schema_definition`: a programming error thrown at definition time, never during a call, so it is
 * not a `ToolError`: it never crosses a wire.
 */
export class SchemaDefinitionError extends Error {
  readonly code = "schema_definition";
  readonly data: { readonly schema: string; readonly problems: readonly string[] };
  readonly problems: readonly string[];

  constructor(schemaName: string, problems: readonly string[]) {
    super(`schema "${schemaName}" is not valid: ${problems.join("; ")}`);
    this.name = "SchemaDefinitionError";
    this.problems = problems;
    this.data = { schema: schemaName, problems };
    setBrand(this, schemaDefinitionErrorBrand);
  }

  /** True for a SchemaDefinitionError from any copy of this package. */
  static isInstance(value: unknown): value is SchemaDefinitionError {
    return hasBrand(value, schemaDefinitionErrorBrand);
  }
}
