/**
 * The schema as the model reads it in the prompt: every entity kind with its fields' types, bounds and
 * defaults, every relation kind with its ends, cardinality, order and slot, every invariant by name.
 * Compact by design: kinds with the same fields share a line, and the whole prompt of the timeline
 * fits `promptBudget` tokens (`prompt.test.ts` counts them).
 */
import type { Schema } from "../schema/define-schema.ts";
import type { FieldSpec } from "../schema/field.ts";

/** One field: `name: type bounds`, `?` optional, `|null` nullable, `=default`, `host-only`, `fixed`. */
function describeField(name: string, spec: FieldSpec): string {
  const flags = [spec.hostOnly === true ? "host-only" : "", spec.fixed === true ? "fixed" : ""].filter(
    (flag) => flag !== "",
  );
  const nullable = spec.nullable === true ? "|null" : "";
  const optional = spec.optional === true ? "?" : "";
  const fallback = "default" in spec && spec.default !== undefined ? `=${JSON.stringify(spec.default)}` : "";
  return `${name}${optional}: ${describeType(spec)}${nullable}${fallback}${flags.length === 0 ? "" : ` (${flags.join(", ")})`}`;
}

function describeType(spec: FieldSpec): string {
  switch (spec.type) {
    case "string": {
      if (spec.enum !== undefined) return spec.enum.map((value) => JSON.stringify(value)).join("|");
      const bounds = [
        spec.minLength === undefined ? "" : `≥${spec.minLength}`,
        spec.maxLength === undefined ? "" : `≤${spec.maxLength}`,
      ].filter((bound) => bound !== "");
      return `string${bounds.length === 0 ? "" : `(${bounds.join(",")})`}${spec.pattern === undefined ? "" : ` /${spec.pattern}/`}`;
    }
    case "number": {
      const kind = spec.integer === true ? "integer" : "number";
      if (spec.min === undefined && spec.max === undefined) return kind;
      return `${kind} ${spec.min ?? "…"}..${spec.max ?? "…"}`;
    }
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "text":
      return `text${spec.maxLength === undefined ? "" : `(≤${spec.maxLength})`}`;
    case "list": {
      const bounds = [
        spec.minItems === undefined ? "" : `≥${spec.minItems}`,
        spec.maxItems === undefined ? "" : `≤${spec.maxItems}`,
      ].filter((bound) => bound !== "");
      return `list<${describeType(spec.items)}>${bounds.length === 0 ? "" : `(${bounds.join(",")})`}`;
    }
    case "record":
      return `{ ${Object.entries(spec.fields)
        .map(([name, field]) => describeField(name, field))
        .join("; ")} }`;
  }
}

/** The schema section of the prompt. */
export function describeSchema(schema: Schema): string {
  const lines = [
    `Schema \`${schema.name}\`. Entity kinds (field: type; \`?\` optional, \`|null\` nullable, \`=\` default; (≤n) string length or list size):`,
  ];
  // Kinds declaring the same fields and notes share one line.
  const groups = new Map<string, string[]>();
  for (const [kind, spec] of Object.entries(schema.entities)) {
    const fields = Object.entries(spec.fields).map(([name, field]) => describeField(name, field));
    const notes = [
      spec.identity === undefined ? "" : `one per ${spec.identity.join("+")}`,
      spec.variants === true ? "variants" : "",
    ].filter((note) => note !== "");
    const line = `${notes.length === 0 ? "" : ` [${notes.join("; ")}]`}: ${fields.join("; ")}`;
    groups.set(line, [...(groups.get(line) ?? []), kind]);
  }
  for (const [line, kinds] of groups) lines.push(`- ${kinds.join(", ")}${line}`);
  lines.push("Relation kinds (endpoint0 → endpoint1, cardinality):");
  for (const [kind, spec] of Object.entries(schema.relations)) {
    const shapes = spec.shapes.map((shape) => {
      const slot =
        shape.slot === undefined
          ? ""
          : `, slot "${shape.slot.name}"${shape.slot.required === true ? " required" : ""}${shape.slot.embed === true ? " embedded" : ""}`;
      const to = shape.to.join("|") === shape.from.join("|") ? "the same" : shape.to.join("|");
      return `${shape.from.join("|")} → ${to} (${shape.cardinality ?? "many-to-many"}${shape.ordered === true ? ", ordered" : ""}${slot})`;
    });
    lines.push(`- ${kind}: ${shapes.join("; ")}`);
  }
  if (schema.invariants.length > 0)
    lines.push(
      `Invariants checked on the whole plan: ${schema.invariants
        .map((invariant) =>
          invariant.description === undefined
            ? invariant.name
            : `${invariant.name} (${invariant.description})`,
        )
        .join("; ")}.`,
    );
  return lines.join("\n");
}
