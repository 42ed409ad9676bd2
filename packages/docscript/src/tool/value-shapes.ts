/** What a refused write tells a model about the values it gave: their type and size, never their content. */
import { DocScriptError, type DocScriptErrorCode } from "../schema/docscript-error.ts";
import type { DocumentIssue } from "../schema/types.ts";

/** Issues of one refusal given a value's shape: the rest stay as they are (each costs a walk of the ops). */
const maxShapedIssues = 20;

/** A value as a model needs to see it to fix a write: its type and size, never its whole content. */
export function valueShape(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `array of ${value.length}`;
  if (typeof value === "string")
    return value.length <= 40 ? `string ${JSON.stringify(value)}` : `string of ${value.length} characters`;
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object);
    return `object {${keys.slice(0, 8).join(", ")}${keys.length > 8 ? ", …" : ""}}`;
  }
  return typeof value;
}

/** The value a write gave at `path`: an update op's value at that path, or a created payload's field. */
function valueAt(
  args: readonly unknown[],
  path: readonly (string | number)[],
): { found: boolean; value?: unknown } {
  const [first, second] = args;
  if (Array.isArray(second)) {
    for (const op of second as { path?: unknown; value?: unknown }[]) {
      if (!Array.isArray(op?.path) || !("value" in (op ?? {}))) continue;
      const opPath = op.path as (string | number)[];
      if (opPath.length > path.length || opPath.some((step, index) => step !== path[index])) continue;
      let value: unknown = op.value;
      for (const step of path.slice(opPath.length))
        value = (value as Record<string | number, unknown> | null)?.[step];
      return { found: true, value };
    }
    return { found: false };
  }
  const payload = (first as { payload?: unknown } | null)?.payload;
  if (typeof payload !== "object" || payload === null || path.length === 0) return { found: false };
  let value: unknown = payload;
  for (const step of path) {
    if (typeof value !== "object" || value === null || !Object.hasOwn(value, step)) return { found: false };
    value = (value as Record<string | number, unknown>)[step];
  }
  return { found: true, value };
}

/** A refused write's issues, each with the shape of the value the write gave at its path. */
export function withValueShapes(error: unknown, args: readonly unknown[]): unknown {
  if (!DocScriptError.isInstance(error) || error.issues.length === 0) return error;
  const issues = error.issues.map((issue, index) => {
    if (index >= maxShapedIssues) return issue;
    const given = valueAt(args, issue.path);
    return given.found ? { ...issue, value: valueShape(given.value) } : issue;
  });
  const { resource, id } = error.data;
  // A `not_found` keeps the resource and id it names (ADR 0027).
  const found = resource === undefined || id === undefined ? undefined : { resource, id };
  return new DocScriptError(error.code as DocScriptErrorCode, error.message, issues, undefined, found);
}

export function refused(
  code: DocScriptErrorCode,
  message: string,
  issues: DocumentIssue[] = [],
): DocScriptError {
  return new DocScriptError(code, message, issues);
}
