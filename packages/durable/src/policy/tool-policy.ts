/** Per-tool policy for the integrations: plain data, so it survives serialization. */
import { tooDeep } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import { type Backoff, checkStepOptions } from "../runner/step-policy.ts";

export interface ToolPolicy {
  /** Emit tool_call frames for this tool. Default true. */
  readonly show?: boolean;
  /**
   * Field paths masked in frames and approvals (`card.number`, `items.*.sku`), each value there replaced
   * whole; the tool still gets the real values. A key holding dots is reached by the path that spells it.
   */
  readonly redact?: readonly string[];
  /** Pause for a human's approval before running. Default false. */
  readonly approve?: boolean;
  /**
   * Tries again on every error but non-retryable ones (each try journaled); as `RetryPolicy`, in plain
   * data: `nonRetryable` and `retryOn` list codes and HTTP statuses.
   */
  readonly retry?: {
    readonly attempts?: number;
    readonly backoff?: Backoff;
    readonly jitter?: number;
    readonly nonRetryable?: readonly (string | number)[];
    readonly retryOn?: readonly (string | number)[];
  };
  /** Longest one try may take; then its signal aborts and the try fails with `step_timeout`. */
  readonly timeoutMs?: number;
}

export type ToolPolicies = Readonly<Record<string, ToolPolicy>>;

const mask = "[redacted]";

/** Checks that policies are plain data of the right shape; throws `invalid_policy` naming the field. */
export function validatePolicies(policies: unknown): ToolPolicies {
  if (typeof policies !== "object" || policies === null || Array.isArray(policies)) {
    throw new DurableError("invalid_policy", "Tool policies are an object keyed by tool name");
  }
  for (const [name, policy] of Object.entries(policies)) {
    if (typeof policy !== "object" || policy === null || Array.isArray(policy)) {
      throw new DurableError("invalid_policy", `The policy of "${name}" is not an object`);
    }
    for (const [field, value] of Object.entries(policy)) {
      const ok =
        field === "redact"
          ? Array.isArray(value) && value.every((path) => typeof path === "string")
          : field === "retry"
            ? typeof value === "object" &&
              value !== null &&
              typeof (value as { retryOn?: unknown }).retryOn !== "function"
            : field === "timeoutMs"
              ? typeof value === "number"
              : (field === "show" || field === "approve") && typeof value === "boolean";
      if (!ok)
        throw new DurableError("invalid_policy", `The policy of "${name}" has an invalid field "${field}"`);
    }
    checkStepOptions(policy as ToolPolicy, `The policy of "${name}"`);
  }
  return policies as ToolPolicies;
}

/**
 * A copy of `value` with each path masked: the value there is replaced whole by `"[redacted]"`, whatever
 * its type; a missing path is left missing. `*` matches every key or index; a key holding dots is matched
 * by the path that spells it. The input is not touched.
 */
export function redact(value: unknown, paths: readonly string[]): unknown {
  let copy: unknown;
  try {
    copy = structuredClone(value);
  } catch (error) {
    // A value nested too deep to copy overflows the stack inside structuredClone: refused by name.
    if (error instanceof RangeError) throw tooDeep("the value to redact");
    throw error;
  }
  for (const path of paths) copy = maskPath(copy, path.split("."));
  return copy;
}

function maskPath(value: unknown, parts: readonly string[]): unknown {
  if (parts.length === 0) return mask;
  if (typeof value !== "object" || value === null) return value;
  const target = value as Record<string, unknown>;
  // Own enumerable keys only: an array's `length` or an inherited `constructor` is no value to mask.
  const own = (key: string) => Object.prototype.propertyIsEnumerable.call(target, key);
  if (parts[0] === "*") {
    for (const key of Object.keys(target)) target[key] = maskPath(target[key], parts.slice(1));
  }
  // A key may hold dots: `a.b.c` reaches key "a.b" then "c" as well as "a" then "b.c" and "a.b.c".
  for (let end = 1; end <= parts.length; end++) {
    const key = parts.slice(0, end).join(".");
    if (own(key)) target[key] = maskPath(target[key], parts.slice(end));
  }
  return value;
}
