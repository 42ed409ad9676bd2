/**
 * `bindIdentity`: the scope fields a serving layer put in the tool context win over what the model
 * wrote, so a model cannot read or write another user's memory by naming them.
 */
import type { ToolContext } from "@tackle/core";
import { MEMORY_SCOPE_VALUES, type MemoryScope } from "../scope/memory-scope.ts";

export function bindIdentity<Input extends object>(input: Input, context: ToolContext): Input {
  const bound = { ...input } as Record<string, unknown>;
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = context.identity?.[field];
    if (typeof value === "string" && value !== "") {
      bound[field] = value;
      // An identity the serving layer set confines the call: the model cannot widen it to the tenant.
      delete bound.wholeTenant;
    }
  }
  return bound as Input;
}

/**
 * The context's identity as a scope, for operations by id: the service answers `not_found` for a
 * record outside it (undefined without an identity: the tenant's whole view).
 */
export function identityScope(context: ToolContext): MemoryScope | undefined {
  if (context.identity === undefined) return undefined;
  const scope: Record<string, string> = {};
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = context.identity[field];
    if (typeof value === "string" && value !== "") scope[field] = value;
  }
  return scope;
}

/** The call options of an operation by id: the abort signal and the identity's scope. */
export function byIdOptions(context: ToolContext): { signal?: AbortSignal; scope?: MemoryScope } {
  const scope = identityScope(context);
  return {
    ...(context.signal === undefined ? {} : { signal: context.signal }),
    ...(scope === undefined ? {} : { scope }),
  };
}
