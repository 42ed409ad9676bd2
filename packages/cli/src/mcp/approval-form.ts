/**
 * An approval as an MCP elicitation form (ADR 0265): the call's editable arguments (its input schema's
 * top-level properties of a primitive type, each prefilled with the value the call asked for), an
 * `approve` switch and a `reason`; and the client's answer as the durable approval's answer.
 */
import type { ElicitAnswer } from "@tackle/core";
import { ownValue } from "@tackle/core/internal";

/** What a durable approval answer holds (`@tackle/durable`'s `ApprovalAnswer`). */
export interface FormAnswer {
  readonly approved: boolean;
  readonly reason?: string;
  readonly editedArgs?: Record<string, unknown>;
}

export interface ApprovalForm {
  readonly message: string;
  /** A flat object schema of primitive properties, as MCP's form elicitation takes. */
  readonly requestedSchema: Record<string, unknown>;
  /** The client's answer as the approval's. */
  answer(reply: ElicitAnswer): FormAnswer;
}

/** Keys a primitive property may keep in an elicitation schema (MCP's `PrimitiveSchemaDefinition`). */
const kept = {
  string: ["title", "description", "minLength", "maxLength", "format", "enum", "enumNames"],
  number: ["title", "description", "minimum", "maximum"],
  integer: ["title", "description", "minimum", "maximum"],
  boolean: ["title", "description"],
} as const;
const formats = new Set(["email", "uri", "date", "date-time"]);

export function approvalForm(
  tool: string,
  args: Record<string, unknown>,
  inputSchema: Record<string, unknown> | undefined,
): ApprovalForm {
  const editable = editableProperties(inputSchema, args);
  const approveKey = freeKey("approve", editable);
  const reasonKey = freeKey("reason", editable);
  const fixed = Object.keys(args).filter((key) => !Object.hasOwn(editable, key));
  const message = [
    `Approve the call of ${tool}?`,
    `It asks to run with ${JSON.stringify(args)}.`,
    Object.keys(editable).length === 0
      ? ""
      : `You may change ${Object.keys(editable).join(", ")} before approving.`,
    fixed.length === 0 ? "" : `${fixed.join(", ")} run as shown.`,
    `Set ${approveKey} off (or decline) to reject it; a reason is told to whoever asked.`,
  ]
    .filter((part) => part !== "")
    .join(" ");
  const requestedSchema = {
    type: "object",
    properties: {
      [approveKey]: {
        type: "boolean",
        title: "Approve",
        description: `Run ${tool} with the values below`,
        default: true,
      },
      [reasonKey]: { type: "string", title: "Reason", description: "Why (kept with the decision)" },
      ...editable,
    },
    required: [approveKey],
  };
  return {
    message,
    requestedSchema,
    answer(reply) {
      const content = reply.content ?? {};
      const reason =
        typeof content[reasonKey] === "string" && content[reasonKey] !== "" ? content[reasonKey] : undefined;
      if (reply.action !== "accept") {
        return {
          approved: false,
          reason:
            reason ?? (reply.action === "decline" ? "declined at the client" : "cancelled at the client"),
        };
      }
      if (content[approveKey] === false)
        return { approved: false, reason: reason ?? "rejected at the client" };
      // Own keys only, and objects built from entries: an argument named `constructor` reads no
      // inherited function and one named `__proto__` stays a key (it would set the prototype).
      const edits = Object.fromEntries(
        Object.keys(editable).flatMap((key) =>
          Object.hasOwn(content, key) && content[key] !== ownValue(args, key) ? [[key, content[key]]] : [],
        ),
      );
      return {
        approved: true,
        ...(reason === undefined ? {} : { reason }),
        ...(Object.keys(edits).length === 0 ? {} : { editedArgs: { ...args, ...edits } }),
      };
    },
  };
}

/** The input schema's top-level primitive properties, as elicitation property schemas with defaults. */
function editableProperties(
  inputSchema: Record<string, unknown> | undefined,
  args: Record<string, unknown>,
): Record<string, Record<string, unknown>> {
  const properties = inputSchema?.properties;
  if (typeof properties !== "object" || properties === null) return {};
  const editable: [string, Record<string, unknown>][] = [];
  for (const [key, raw] of Object.entries(properties as Record<string, unknown>)) {
    if (typeof raw !== "object" || raw === null) continue;
    const schema = raw as Record<string, unknown>;
    const type = typeof schema.type === "string" ? schema.type : Array.isArray(schema.enum) ? "string" : "";
    if (!Object.hasOwn(kept, type)) continue;
    if (Array.isArray(schema.enum) && !schema.enum.every((value) => typeof value === "string")) continue;
    const property: Record<string, unknown> = { type };
    for (const name of kept[type as keyof typeof kept]) {
      if (schema[name] === undefined) continue;
      if (name === "format" && !formats.has(String(schema.format))) continue;
      property[name] = schema[name];
    }
    // `exclusiveMinimum` as a number: the form's bound is the nearest it can say.
    if (typeof schema.exclusiveMinimum === "number" && property.minimum === undefined)
      property.minimum = schema.exclusiveMinimum;
    if (typeof schema.exclusiveMaximum === "number" && property.maximum === undefined)
      property.maximum = schema.exclusiveMaximum;
    const value = ownValue(args, key) ?? schema.default;
    if (value !== undefined && isOfType(value, type)) property.default = value;
    editable.push([key, property]);
  }
  return Object.fromEntries(editable);
}

function isOfType(value: unknown, type: string): boolean {
  if (type === "integer") return Number.isInteger(value);
  return typeof value === type;
}

/** `name`, or `_name`, `__name`…, whichever no argument uses. */
function freeKey(name: string, taken: Record<string, unknown>): string {
  let key = name;
  while (Object.hasOwn(taken, key)) key = `_${key}`;
  return key;
}
