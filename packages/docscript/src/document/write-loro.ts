/** Compile, container level: plain payload values and update ops written into a row's Loro containers. */

import { LoroList, LoroMap, LoroText } from "loro-crdt";
import type { FieldSpec } from "../schema/field.ts";
import { isPlainRecord, ownValue } from "../schema/own-keys.ts";
import type { UpdateOp } from "./update-op.ts";

/** Writes every field of `payload` into `fields` (a fresh row's fields map). */
export function writeFields(
  fields: LoroMap,
  specs: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
): void {
  for (const [name, value] of Object.entries(payload)) {
    const spec = ownValue(specs, name);
    if (spec !== undefined) writeValue(fields, name, spec, value);
  }
}

/** A scalar Loro reads back as it was given (-0 reads back as 0). */
function storesAsGiven(value: unknown): boolean {
  return (
    value === null ||
    typeof value === "string" ||
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isFinite(value) && !Object.is(value, -0))
  );
}

/**
 * A fresh copy of `payload` equal to what `writeFields` leaves in a fresh fields map and reading it back
 * answers (but for the order of keys), or undefined when the two could differ: a key with no field (not
 * written), an undefined value (not written), -0 (read back as 0), a list holding records or lists,
 * anything else no check passes. A write that stages the copy need not read its row back.
 */
export function storedCopy(
  specs: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  if (!isPlainRecord(payload)) return undefined;
  const copy: Record<string, unknown> = {};
  for (const name of Object.keys(payload)) {
    const spec = ownValue(specs, name);
    const value = payload[name];
    if (spec === undefined || value === undefined) return undefined;
    if (spec.type === "list" && Array.isArray(value)) {
      if (!value.every(storesAsGiven)) return undefined;
      copy[name] = [...value];
    } else if (spec.type === "record" && isPlainRecord(value)) {
      const record = storedCopy(spec.fields, value);
      if (record === undefined) return undefined;
      copy[name] = record;
    } else if (storesAsGiven(value)) copy[name] = value;
    else return undefined;
  }
  return copy;
}

/** Writes one value under `key`: text, lists and records become containers so later edits merge finely. */
export function writeValue(map: LoroMap, key: string, spec: FieldSpec, value: unknown): void {
  if (value === undefined) {
    map.delete(key);
    return;
  }
  if (
    value === null ||
    spec.type === "string" ||
    spec.type === "number" ||
    spec.type === "boolean" ||
    spec.type === "null"
  ) {
    map.set(key, value as never);
    return;
  }
  const existing = map.get(key) as unknown;
  if (spec.type === "text") {
    if (existing instanceof LoroText) {
      existing.update(value as string);
      return;
    }
    const text = map.setContainer(key, new LoroText());
    if ((value as string).length > 0) text.insert(0, value as string);
    return;
  }
  if (spec.type === "list") {
    const list = map.setContainer(key, new LoroList());
    for (const item of value as unknown[]) list.push(item as never);
    return;
  }
  const record = existing instanceof LoroMap ? existing : map.setContainer(key, new LoroMap());
  const given = value as Record<string, unknown>;
  for (const [name, sub] of Object.entries(spec.fields)) {
    if (Object.hasOwn(given, name)) writeValue(record, name, sub, given[name]);
    else if (record.get(name) !== undefined) record.delete(name);
  }
}

/** Copies a container subtree's plain value into a new parent (an entity moving into or out of a slot). */
export function copyFields(
  target: LoroMap,
  specs: Readonly<Record<string, FieldSpec>>,
  payload: Readonly<Record<string, unknown>>,
): void {
  writeFields(target, specs, payload);
}

/**
 * Applies one checked op to the Loro containers of `fields`, as a splice or a list insert where it can,
 * so concurrent edits to other characters and items merge. `before` is the payload the op was checked on.
 */
export function applyOpToLoro(
  fields: LoroMap,
  specs: Readonly<Record<string, FieldSpec>>,
  op: UpdateOp,
  after: Readonly<Record<string, unknown>>,
): void {
  const path = op.path;
  let container: LoroMap | LoroList = fields;
  let spec: FieldSpec = { type: "record", fields: specs };
  let afterValue: unknown = after;
  for (let step = 0; step < path.length; step++) {
    const key = path[step] as string | number;
    const last = step === path.length - 1;
    if (container instanceof LoroList) {
      const index = key as number;
      if (last && op.op === "insert") {
        container.insert(index, (afterValue as unknown[])[index] as never);
      } else if (last && op.op === "remove") {
        container.delete(index, 1);
      } else {
        // List items are whole values: replace the item with its new value.
        container.delete(index, 1);
        container.insert(index, (afterValue as unknown[])[index] as never);
      }
      return;
    }
    const map: LoroMap = container;
    const childSpec: FieldSpec | undefined = spec.type === "record" ? ownValue(spec.fields, key) : undefined;
    if (childSpec === undefined) return;
    const childAfter = (afterValue as Record<string, unknown> | null)?.[key as string];
    if (last) {
      if (op.op === "splice") {
        const text = map.get(key as string) as unknown;
        if (text instanceof LoroText) {
          const start = text.convertPos(op.index, "unicode", "utf16") ?? text.length;
          const end = text.convertPos(op.index + (op.deleteCount ?? 0), "unicode", "utf16") ?? text.length;
          text.splice(start, end - start, op.insert ?? "");
          return;
        }
      }
      writeValue(map, key as string, childSpec, op.op === "unset" ? undefined : childAfter);
      return;
    }
    const child = map.get(key as string) as unknown;
    if (child instanceof LoroMap || child instanceof LoroList) {
      container = child;
      spec = childSpec;
      afterValue = childAfter;
      continue;
    }
    // Not a container (a record stored as null, say): write the whole field's new value.
    writeValue(map, key as string, childSpec, childAfter);
    return;
  }
}
