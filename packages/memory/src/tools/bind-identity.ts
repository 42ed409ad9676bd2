/**
 * `bindIdentity`: the scope fields a serving layer put in the tool context win over what the model
 * wrote, so a model cannot read or write another user's memory by naming them.
 */
import type { ToolContext } from "@tackle/core";
import { MEMORY_SCOPE_VALUES } from "../scope/memory-scope.ts";

export function bindIdentity<Input extends object>(input: Input, context: ToolContext): Input {
  const bound = { ...input } as Record<string, unknown>;
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = context.identity?.[field];
    if (typeof value === "string" && value !== "") bound[field] = value;
  }
  return bound as Input;
}

/** Refuses a memory outside the context's identity, as if it did not exist (no existence leak). */
export function ownedBy(record: object, context: ToolContext): boolean {
  return MEMORY_SCOPE_VALUES.every((field) => {
    const value = context.identity?.[field];
    return typeof value !== "string" || value === "" || (record as Record<string, unknown>)[field] === value;
  });
}
