/** Update ops: a write's changes to one entity's payload, addressed by path, applied to plain values. */

import { DocScriptError } from "../schema/docscript-error.ts";
import type { FieldSpec } from "../schema/field.ts";
import { fieldAt } from "../schema/validate-payload.ts";

export type PayloadPath = readonly (string | number)[];

/**
 * - `set`: a field, a nested record field, or a list item (by index) takes `value`.
 * - `unset`: an optional field is removed.
 * - `insert` / `remove`: a list item at the index that ends `path`.
 * - `splice`: text at `path` loses `deleteCount` code points at `index` and gains `insert`.
 */
export type UpdateOp =
  | { readonly op: "set"; readonly path: PayloadPath; readonly value: unknown }
  | { readonly op: "unset"; readonly path: PayloadPath }
  | { readonly op: "insert"; readonly path: PayloadPath; readonly value: unknown }
  | { readonly op: "remove"; readonly path: PayloadPath }
  | {
      readonly op: "splice";
      readonly path: PayloadPath;
      readonly index: number;
      readonly deleteCount?: number;
      readonly insert?: string;
    };

function invalid(entityId: string, path: PayloadPath, message: string): DocScriptError {
  return new DocScriptError("invalid_operation", `${entityId} ${path.join(".")}: ${message}`, [
    { constraint: "operation", message, entityId, path: [...path] },
  ]);
}

/** Checks an op's form against the kind's fields; throws `invalid_operation` naming the path. */
export function checkOp(fields: Readonly<Record<string, FieldSpec>>, op: UpdateOp, entityId: string): void {
  const raw = op as { op?: unknown; path?: unknown };
  const path = Array.isArray(raw.path) ? (raw.path as PayloadPath) : [];
  if (
    !Array.isArray(raw.path) ||
    path.length === 0 ||
    !path.every((step) => typeof step === "string" || (Number.isInteger(step) && (step as number) >= 0))
  ) {
    throw invalid(entityId, path, "path must be a non-empty list of field names and list indexes");
  }
  if (typeof path[0] !== "string") throw invalid(entityId, path, "path must start with a field name");
  switch (raw.op) {
    case "set":
    case "unset":
      if (fieldAt(fields, path) === undefined) throw invalid(entityId, path, "no such field");
      if (raw.op === "unset" && !fieldAt(fields, path)?.optional)
        throw invalid(entityId, path, "only an optional field can be unset");
      return;
    case "insert":
    case "remove":
      if (typeof path.at(-1) !== "number" || fieldAt(fields, path.slice(0, -1))?.type !== "list") {
        throw invalid(entityId, path, `${raw.op} needs a path ending in an index of a list field`);
      }
      return;
    case "splice": {
      const splice = op as Extract<UpdateOp, { op: "splice" }>;
      if (fieldAt(fields, path)?.type !== "text") throw invalid(entityId, path, "splice needs a text field");
      if (!Number.isInteger(splice.index) || splice.index < 0)
        throw invalid(entityId, path, "splice needs a non-negative integer index");
      if (
        splice.deleteCount !== undefined &&
        (!Number.isInteger(splice.deleteCount) || splice.deleteCount < 0)
      ) {
        throw invalid(entityId, path, "deleteCount must be a non-negative integer");
      }
      if (splice.insert !== undefined && typeof splice.insert !== "string")
        throw invalid(entityId, path, "insert must be a string");
      return;
    }
    default:
      throw invalid(
        entityId,
        path,
        `unknown op ${JSON.stringify(raw.op)}; use set, unset, insert, remove or splice`,
      );
  }
}

/** The payload after `op`, leaving `payload` untouched; throws `invalid_operation` for a path that does not exist. */
export function applyOpToValue(
  payload: Readonly<Record<string, unknown>>,
  op: UpdateOp,
  entityId: string,
  /**
   * Lists and records this update already copied: edited in place by its later ops, so an update of N
   * ops costs what its ops touch, not N copies of the payload. Nothing in it is shared with a caller.
   */
  fresh?: WeakSet<object>,
): Record<string, unknown> {
  const path = op.path;
  const edit = (current: unknown, step: number): unknown => {
    const key = path[step] as string | number;
    const last = step === path.length - 1;
    if (Array.isArray(current)) {
      if (typeof key !== "number") throw invalid(entityId, path, "a list is addressed by index");
      const copy = fresh?.has(current) ? current : [...current];
      fresh?.add(copy);
      if (last && op.op === "insert") {
        if (key > copy.length)
          throw invalid(entityId, path, `index ${key} is past the list's end (${copy.length})`);
        copy.splice(key, 0, structuredClone(op.value));
        return copy;
      }
      if (key >= copy.length)
        throw invalid(entityId, path, `index ${key} is past the list's end (${copy.length})`);
      if (last && op.op === "remove") {
        copy.splice(key, 1);
        return copy;
      }
      copy[key] = last ? finalValue(copy[key]) : edit(copy[key], step + 1);
      return copy;
    }
    if (current === null || typeof current !== "object")
      throw invalid(entityId, path, `${path.slice(0, step).join(".") || "payload"} holds no fields`);
    const record = fresh?.has(current)
      ? (current as Record<string, unknown>)
      : { ...(current as Record<string, unknown>) };
    fresh?.add(record);
    if (typeof key !== "string") throw invalid(entityId, path, "a record is addressed by field name");
    if (last) {
      if (op.op === "unset") delete record[key];
      else record[key] = finalValue(record[key]);
      return record;
    }
    record[key] = edit(record[key], step + 1);
    return record;
  };
  const finalValue = (current: unknown): unknown => {
    if (op.op === "splice") {
      if (typeof current !== "string") throw invalid(entityId, path, "splice needs text");
      const points = [...current];
      if (op.index > points.length)
        throw invalid(
          entityId,
          path,
          `index ${op.index} is past the text's end (${points.length} code points)`,
        );
      points.splice(op.index, op.deleteCount ?? 0, ...(op.insert ?? ""));
      return points.join("");
    }
    return structuredClone((op as { value?: unknown }).value);
  };
  return edit(payload, 0) as Record<string, unknown>;
}
