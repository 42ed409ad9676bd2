/**
 * A form drawn from a JSON Schema (a tool's input, a paused call's arguments to edit), and the helpers
 * that fill it in and place a validator's messages beside its fields.
 */
import type { Issue } from "./api.ts";
import { h, json } from "./dom.ts";

/** The part of JSON Schema the form draws. */
export interface Schema {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly items?: Schema | readonly Schema[] | boolean;
  readonly enum?: readonly unknown[];
  readonly default?: unknown;
  readonly description?: string;
  readonly maxLength?: number;
  readonly [key: string]: unknown;
}

export interface SchemaForm {
  readonly element: HTMLElement;
  /** False when the whole schema fell back to one JSON field. */
  readonly drawn: boolean;
  /** The value (undefined when left empty); throws when a JSON field holds no JSON. */
  read(): unknown;
  clearErrors(): void;
  /** Puts the issues beside their fields; returns those it could not place. */
  showIssues(issues: readonly Issue[]): Issue[];
}

interface Field {
  readonly element: HTMLElement;
  readonly drawn?: boolean;
  read(): unknown;
  setError(message: string): void;
}

type Value = Record<string, unknown>;

/** Where a field is drawn: its schema and place, its ids, its error slot; `child` draws a field inside it. */
interface Spot {
  readonly schema: Schema;
  readonly path: readonly string[];
  readonly label: string;
  readonly required: boolean;
  readonly isRoot: boolean;
  readonly key: string;
  readonly fieldId: string;
  readonly errorId: string;
  readonly error: HTMLElement;
  readonly description: HTMLElement | undefined;
  readonly labelText: string;
  readonly type: string | undefined;
  setError(message: string): void;
  labelled(control: HTMLElement, text?: string): HTMLElement;
  child(schema: Schema, path: readonly string[], label: string, required: boolean, isItem?: boolean): Field;
}

type Built = Omit<Field, "setError">;

function typeOf(schema: Schema): string | undefined {
  return Array.isArray(schema.type)
    ? (schema.type as readonly string[]).find((t) => t !== "null")
    : (schema.type as string | undefined);
}

/**
 * A form for a JSON Schema: objects as fieldsets, arrays as lists with add/remove, enums as selects,
 * booleans as checkboxes, numbers and strings as inputs (defaults filled in, or the given values);
 * anything else as JSON.
 */
export function buildForm(schema: Schema, id: string, values?: unknown): SchemaForm {
  const fields = new Map<string, Field>();
  const root = field(withValues(schema, values), [], id, "Arguments", true, true);
  return {
    element: root.element,
    drawn: root.drawn !== false,
    read: () => root.read(),
    clearErrors() {
      for (const entry of fields.values()) entry.setError("");
    },
    showIssues(issues) {
      const unplaced: Issue[] = [];
      for (const issue of issues) {
        let path = issue.path.map(String);
        let target = fields.get(path.join("."));
        while (target === undefined && path.length > 0) {
          path = path.slice(0, -1);
          target = fields.get(path.join("."));
        }
        if (target === undefined || path.length === 0) unplaced.push(issue);
        else target.setError(issue.message);
      }
      return unplaced;
    },
  };

  function field(
    schema: Schema,
    path: readonly string[],
    baseId: string,
    label: string,
    required: boolean,
    isRoot = false,
    isItem = false,
  ): Field {
    const key = path.join(".");
    const fieldId = `${baseId}-${path.join("-") || "root"}`;
    const errorId = `${fieldId}-error`;
    const error = h("span", { class: "field-error", id: errorId, "aria-live": "polite" });
    const setError = (message: string) => {
      error.textContent = message;
    };
    const description = schema.description ? h("span", { class: "hint" }, schema.description) : undefined;
    const labelText = [label, required && !isRoot && !isItem ? " *" : ""].join("");
    const type = typeOf(schema);
    const spot: Spot = {
      schema,
      path,
      label,
      required,
      isRoot,
      key,
      fieldId,
      errorId,
      error,
      setError,
      description,
      labelText,
      type,
      labelled: (control, text = labelText) =>
        h("div", { class: "field" }, h("label", { for: fieldId }, text), control, description, error),
      child: (childSchema, childPath, childLabel, childRequired, item = false) =>
        field(childSchema, childPath, baseId, childLabel, childRequired, false, item),
    };
    const built =
      type === "object" && schema.properties !== undefined
        ? objectField(spot)
        : type === "array" && typeof schema.items === "object" && !Array.isArray(schema.items)
          ? arrayField(spot)
          : Array.isArray(schema.enum)
            ? enumField(spot)
            : type === "boolean"
              ? booleanField(spot)
              : type === "number" || type === "integer"
                ? numberField(spot)
                : type === "string"
                  ? stringField(spot)
                  : jsonField(spot);
    const entry: Field = { ...built, setError };
    fields.set(key, entry);
    return entry;
  }
}

function objectField(spot: Spot): Built {
  const { schema, path, required, isRoot, error, description, labelText } = spot;
  const requiredNames = new Set(schema.required ?? []);
  const children = Object.entries(schema.properties ?? {}).map(
    ([name, child]) => [name, spot.child(child, [...path, name], name, requiredNames.has(name))] as const,
  );
  const element = h(
    "fieldset",
    { class: isRoot ? "root" : "nested" },
    isRoot ? undefined : h("legend", {}, labelText),
    description,
    children.map(([, child]) => child.element),
    error,
  );
  return {
    element,
    read() {
      const value: Value = {};
      for (const [name, child] of children) {
        const item = child.read();
        // Defined, not assigned: a property named `__proto__` is the tool's, not the object's prototype.
        if (item !== undefined)
          Object.defineProperty(value, name, {
            value: item,
            enumerable: true,
            writable: true,
            configurable: true,
          });
      }
      return Object.keys(value).length === 0 && !isRoot && !required ? undefined : value;
    },
  };
}

function arrayField(spot: Spot): Built {
  const { schema, path, label, required, error, description, labelText } = spot;
  const itemSchema = schema.items as Schema;
  const list = h("ol", { class: "array" });
  const items: { child: Field; row: HTMLElement }[] = [];
  const add = (initial?: unknown) => {
    const index = items.length;
    const child = spot.child(
      withValues(itemSchema, initial),
      [...path, String(index)],
      `${label} ${index + 1}`,
      true,
      true,
    );
    const row = h("li", {}, child.element);
    const entry = { child, row };
    row.append(
      h(
        "button",
        {
          type: "button",
          class: "link",
          "aria-label": `Remove ${label} ${index + 1}`,
          onclick: () => {
            items.splice(items.indexOf(entry), 1);
            row.remove();
          },
        },
        "Remove",
      ),
    );
    items.push(entry);
    list.append(row);
  };
  for (const initial of Array.isArray(schema.default) ? schema.default : []) add(initial);
  const element = h(
    "fieldset",
    { class: "nested" },
    h("legend", {}, labelText),
    description,
    list,
    h(
      "button",
      { type: "button", class: "secondary", onclick: () => add(), "aria-label": `Add ${label}` },
      `Add ${label}`,
    ),
    error,
  );
  return {
    element,
    read() {
      const values = items.map((entry) => entry.child.read());
      if (values.length === 0 && !required) return undefined;
      return values.map((value) => value ?? null);
    },
  };
}

function enumField(spot: Spot): Built {
  const { schema, required, fieldId, errorId, labelled } = spot;
  const select = h(
    "select",
    { id: fieldId, "aria-describedby": errorId },
    required ? undefined : h("option", { value: "" }, "(none)"),
    (schema.enum ?? []).map((option) =>
      h("option", { value: JSON.stringify(option), selected: schema.default === option }, String(option)),
    ),
  );
  return {
    element: labelled(select),
    read: () => (select.value === "" ? undefined : JSON.parse(select.value)),
  };
}

function booleanField(spot: Spot): Built {
  const { schema, required, fieldId, errorId, error, description, labelText } = spot;
  const box = h("input", {
    id: fieldId,
    type: "checkbox",
    checked: schema.default === true,
    "aria-describedby": errorId,
  });
  let touched = false;
  box.addEventListener("change", () => {
    touched = true;
  });
  return {
    element: h(
      "div",
      { class: "field check" },
      box,
      h("label", { for: fieldId }, labelText),
      description,
      error,
    ),
    read: () => (touched || required || schema.default !== undefined ? box.checked : undefined),
  };
}

function numberField(spot: Spot): Built {
  const { schema, fieldId, errorId, labelled, type } = spot;
  const input = h("input", {
    id: fieldId,
    type: "number",
    step: type === "integer" ? "1" : "any",
    value: schema.default as number | undefined,
    "aria-describedby": errorId,
  });
  return {
    element: labelled(input),
    read: () => (input.value === "" ? undefined : Number(input.value)),
  };
}

function stringField(spot: Spot): Built {
  const { schema, label, required, fieldId, errorId, labelled } = spot;
  const long = (schema.maxLength ?? 0) > 2000 || /script|text|content/i.test(label);
  const text = schema.default as string | undefined;
  const input = long
    ? h("textarea", { id: fieldId, rows: 3, "aria-describedby": errorId }, text ?? "")
    : h("input", { id: fieldId, type: "text", value: text, "aria-describedby": errorId });
  return {
    element: labelled(input),
    read: () => (input.value === "" && !required ? undefined : input.value),
  };
}

function jsonField(spot: Spot): Built {
  const { schema, isRoot, key, fieldId, errorId, setError, labelText, labelled } = spot;
  // anyOf, free-form objects, unknown types: JSON text, parsed on read.
  const input = h(
    "textarea",
    {
      id: fieldId,
      rows: isRoot ? 6 : 2,
      class: "mono",
      "aria-describedby": errorId,
      placeholder: "JSON",
    },
    schema.default === undefined ? "" : isRoot ? json(schema.default) : JSON.stringify(schema.default),
  );
  return {
    drawn: !isRoot,
    element: labelled(input, `${labelText} (JSON)`),
    read() {
      if (input.value.trim() === "") return undefined;
      try {
        return JSON.parse(input.value);
      } catch {
        setError("Not valid JSON");
        throw new Error(`${key || "arguments"}: not valid JSON`);
      }
    },
  };
}

/**
 * The schema with `value` as the defaults of its fields (an object's properties one by one, an array's
 * items), so a form opens filled in with it. Redacted values are not filled in: the person never saw them.
 */
export function withValues(schema: Schema, value: unknown): Schema {
  if (value === undefined || value === "[redacted]" || typeof schema !== "object" || schema === null)
    return schema;
  if (typeOf(schema) === "object" && schema.properties !== undefined) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return schema;
    return {
      ...schema,
      properties: Object.fromEntries(
        Object.entries(schema.properties).map(([name, child]) => [
          name,
          // Only the value's own: `constructor` or `toString` it lacks are no defaults.
          withValues(child, Object.hasOwn(value, name) ? (value as Value)[name] : undefined),
        ]),
      ),
    };
  }
  return { ...schema, default: withoutRedacted(value) };
}

/** A value without its redacted parts (an object's redacted entries, an array's redacted items). */
function withoutRedacted(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((item) => item !== "[redacted]").map(withoutRedacted);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => item !== "[redacted]")
      .map(([name, item]) => [name, withoutRedacted(item)]),
  );
}

/**
 * A JSON Schema validator's messages (`#/items/0/sku: message`, as the durable runner words a refused
 * edit) as issues with a path, the shape the form places beside its fields.
 */
export function pointerIssues(messages: readonly unknown[]): Issue[] {
  return messages.map((text) => {
    const match = /^#(\S*): ([\s\S]*)$/.exec(String(text));
    if (match === null) return { path: [], message: String(text) };
    const path = (match[1] ?? "")
      .split("/")
      .slice(1)
      .map((segment) => decodeURIComponent(segment).replace(/~1/g, "/").replace(/~0/g, "~"));
    // A missing required field is the object's error; it belongs beside the field it names.
    const missing = /required property "([^"]+)"/.exec(match[2] ?? "");
    if (missing !== null) return { path: [...path, missing[1] ?? ""], message: "required" };
    return { path, message: match[2] ?? "" };
  });
}
