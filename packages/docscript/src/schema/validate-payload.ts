/** Checks a payload against an entity kind's fields, and fills the defaults of a new entity. */
import type { FieldSpec, RecordField } from "./field.ts";
import { isPlainRecord, ownValue } from "./own-keys.ts";
import type { DocumentIssue } from "./types.ts";

type Path = (string | number)[];
type Report = (constraint: string, path: Path, message: string) => void;

/** Every constraint the payload breaks, as issues naming `entityId` and the field path. */
export function validatePayload(
  fields: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
  entityId: string,
): DocumentIssue[] {
  const issues: DocumentIssue[] = [];
  const report: Report = (constraint, path, message) => issues.push({ constraint, message, entityId, path });
  checkRecordFields(fields, payload, [], report);
  return issues;
}

/** Issues counted by `countIssue`, the report of a value's first check (which needs no path). */
let issuesCounted = 0;
const countIssue: Report = () => {
  issuesCounted++;
};
const noPath: Path = [];

/** A string's length in code points, without building the array of them. */
function codePoints(value: string): number {
  let length = 0;
  for (const _ of value) length++;
  return length;
}

function checkRecordFields(
  fields: Readonly<Record<string, FieldSpec>>,
  value: Readonly<Record<string, unknown>>,
  path: Path,
  report: Report,
): void {
  // A key named `__proto__` read out of Loro becomes the record's prototype, not a key: refused as the
  // field it is, or a push could store what no check reads.
  if (!isPlainRecord(value)) report("field.unknown", [...path, "__proto__"], "is not a field of this kind");
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(fields, key)) report("field.unknown", [...path, key], `is not a field of this kind`);
  }
  for (const [name, spec] of Object.entries(fields)) {
    if (!Object.hasOwn(value, name) || value[name] === undefined) {
      if (!spec.optional) report("field.required", [...path, name], "is required");
      continue;
    }
    // Checked first without its path (every write checks a payload, and most values pass): only a
    // value with an issue is checked again to report it where it is.
    const seen = issuesCounted;
    checkValue(spec, value[name], noPath, countIssue);
    if (issuesCounted !== seen) checkValue(spec, value[name], [...path, name], report);
  }
}

function checkValue(spec: FieldSpec, value: unknown, path: Path, report: Report): void {
  if (value === null) {
    if (spec.type !== "null" && !spec.nullable) report("field.nullable", path, "must not be null");
    return;
  }
  switch (spec.type) {
    case "null":
      report("field.type", path, "must be null");
      return;
    case "string":
    case "text": {
      if (typeof value !== "string") {
        report("field.type", path, `must be a string`);
        return;
      }
      // A lone surrogate is no text: Loro stores a replacement for it, or throws mid-write.
      if (!value.isWellFormed()) {
        report("field.encoding", path, "must be well-formed Unicode text (no lone surrogate)");
        return;
      }
      const length =
        spec.maxLength !== undefined || (spec.type === "string" && spec.minLength !== undefined)
          ? codePoints(value)
          : 0;
      if (spec.type === "string") {
        if (spec.enum !== undefined && !spec.enum.includes(value)) {
          report(
            "field.enum",
            path,
            `must be one of ${spec.enum.map((item) => JSON.stringify(item)).join(", ")}`,
          );
          return;
        }
        if (spec.minLength !== undefined && length < spec.minLength) {
          report("field.minLength", path, `must be at least ${spec.minLength} characters`);
        }
        if (spec.pattern !== undefined && !new RegExp(spec.pattern, "u").test(value)) {
          report("field.pattern", path, `must match /${spec.pattern}/`);
        }
      }
      if (spec.maxLength !== undefined && length > spec.maxLength) {
        report("field.maxLength", path, `must be at most ${spec.maxLength} characters`);
      }
      return;
    }
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) {
        report("field.type", path, "must be a finite number");
        return;
      }
      if (spec.integer && !Number.isInteger(value)) report("field.integer", path, "must be an integer");
      if (spec.min !== undefined && value < spec.min)
        report("field.min", path, `must be at least ${spec.min}`);
      if (spec.max !== undefined && value > spec.max)
        report("field.max", path, `must be at most ${spec.max}`);
      return;
    case "boolean":
      if (typeof value !== "boolean") report("field.type", path, "must be a boolean");
      return;
    case "list":
      if (!Array.isArray(value)) {
        report("field.type", path, "must be a list");
        return;
      }
      if (spec.minItems !== undefined && value.length < spec.minItems) {
        report("field.minItems", path, `must hold at least ${spec.minItems} items`);
      }
      if (spec.maxItems !== undefined && value.length > spec.maxItems) {
        report("field.maxItems", path, `must hold at most ${spec.maxItems} items`);
      }
      value.forEach((item, index) => {
        checkValue(spec.items, item, [...path, index], report);
      });
      return;
    case "record":
      if (typeof value !== "object" || Array.isArray(value)) {
        report("field.type", path, "must be a record");
        return;
      }
      checkRecordFields(spec.fields, value as Record<string, unknown>, path, report);
      return;
  }
}

/** The payload of a new entity: given values over defaults; nullable fields without a default start `null`. */
export function withDefaults(
  fields: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const result: Record<string, unknown> = { ...payload };
  for (const [name, spec] of Object.entries(fields)) {
    if (Object.hasOwn(result, name) && result[name] !== undefined) {
      if (spec.type === "record" && result[name] !== null && typeof result[name] === "object") {
        result[name] = withDefaults(spec.fields, result[name] as Record<string, unknown>);
      }
      continue;
    }
    const fallback = defaultOf(spec);
    if (fallback !== undefined) result[name] = fallback;
  }
  return result;
}

function defaultOf(spec: FieldSpec): unknown {
  if (spec.type === "null") return null;
  if ("default" in spec && spec.default !== undefined) return structuredClone(spec.default);
  if (spec.type === "text") return spec.optional ? undefined : "";
  if (spec.type === "list") return spec.optional ? undefined : [];
  if (spec.type === "record" && !spec.nullable && !spec.optional) return withDefaults(spec.fields, {});
  if (spec.nullable) return null;
  return undefined;
}

/** The spec at a payload path, walking records and list items; `undefined` when the path leaves the schema. */
export function fieldAt(
  fields: Readonly<Record<string, FieldSpec>>,
  path: readonly (string | number)[],
): FieldSpec | undefined {
  let current: FieldSpec = { type: "record", fields } satisfies RecordField;
  for (const step of path) {
    if (current.type === "record" && typeof step === "string") {
      const next: FieldSpec | undefined = ownValue(current.fields, step);
      if (next === undefined) return undefined;
      current = next;
    } else if (current.type === "list" && typeof step === "number") {
      current = current.items;
    } else {
      return undefined;
    }
  }
  return current;
}
