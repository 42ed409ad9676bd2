/** A schema that cannot be used: thrown by `defineSchema`, listing every problem. */
import { ToolError } from "@tackle/core";

export class SchemaDefinitionError extends ToolError {
  readonly problems: readonly string[];

  constructor(schemaName: string, problems: readonly string[]) {
    super("schema_definition", `schema "${schemaName}" is not valid: ${problems.join("; ")}`, {
      data: { schema: schemaName, problems },
    });
    this.name = "SchemaDefinitionError";
    this.problems = problems;
  }
}
