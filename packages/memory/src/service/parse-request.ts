/** Validates a request against its zod schema; bad input becomes `invalid_input` with the issues. */
import type { z } from "zod";
import { MemoryError } from "../errors/memory-error.ts";

export function parseRequest<Schema extends z.ZodType>(schema: Schema, value: unknown): z.output<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: issue.path.filter((key): key is string | number => typeof key !== "symbol"),
    message: issue.message,
  }));
  const summary = issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`).join("; ");
  return thrower(new MemoryError("invalid_input", `Invalid request: ${summary}`, 400, { data: { issues } }));
}

function thrower(error: Error): never {
  throw error;
}
