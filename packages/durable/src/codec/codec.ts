/**
 * The journal codec: tagged JSON that round-trips what a step may return (`undefined`, `Date`, `Map`,
 * `Set`, `BigInt`, `Uint8Array`, errors) and refuses, when recorded, anything that would come back
 * different.
 */
import { ToolError } from "@tackle/core";
import { DurableError } from "../errors/durable-error.ts";

/** The journal schema version this codec writes; records of any other version fail to decode. */
export const codecVersion = 1;

const tag = "$t";

/** How deep a journaled value may nest: far past any API's answer, well within the stack. */
export const maxDepth = 512;

type Encoded = null | boolean | number | string | Encoded[] | { [key: string]: Encoded };

/** Encodes a value to text, or throws `not_serializable` naming the path of the first value that would not round-trip. */
export function encodeValue(value: unknown, label = "value"): string {
  return JSON.stringify({ v: codecVersion, value: encodeAt(value, label, new Set()) });
}

/** Decodes text written by `encodeValue`; anything else throws `journal_decode_failed`. */
export function decodeValue(text: string, label = "value"): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw decodeFailure(label, `it is not JSON (${(error as Error).message})`);
  }
  if (!isRecord(parsed) || !("value" in parsed)) throw decodeFailure(label, "it has no value");
  if (parsed.v !== codecVersion) {
    throw decodeFailure(label, `its schema version ${JSON.stringify(parsed.v)} is not ${codecVersion}`);
  }
  return decodeAt(parsed.value as Encoded, label);
}

/** A throwaway copy through the codec: what a replay would return. */
export function roundTrip<T>(value: T, label = "value"): T {
  return decodeValue(encodeValue(value, label), label) as T;
}

function refuse(path: string, what: string): DurableError {
  return new DurableError(
    "not_serializable",
    `Cannot journal ${path}: ${what} does not survive a round-trip; return plain data (objects, arrays, primitives, Date, Map, Set, BigInt, Uint8Array, errors)`,
    { data: { path } },
  );
}

/**
 * The refusal of a value nested past `maxDepth`: frames, fingerprints and redaction share the codec's
 * bound, so a caller's deep value is refused by name wherever it first lands, never a stack overflow.
 */
export function tooDeep(path: string): DurableError {
  return refuse(path, `a value nested more than ${maxDepth} levels deep`);
}

function decodeFailure(label: string, why: string): DurableError {
  return new DurableError("journal_decode_failed", `The journal record ${label} cannot be decoded: ${why}`, {
    data: { label },
  });
}

function encodeAt(value: unknown, path: string, seen: Set<object>): Encoded {
  switch (typeof value) {
    case "undefined":
      return { [tag]: "undefined" };
    case "boolean":
    case "string":
      return value;
    case "number":
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      return { [tag]: "number", v: String(Object.is(value, -0) ? "-0" : value) };
    case "bigint":
      return { [tag]: "bigint", v: value.toString() };
    case "function":
      return throwRefusal(path, `a function (${value.name || "anonymous"})`);
    case "symbol":
      return throwRefusal(path, `a symbol (${value.description ?? ""})`);
  }
  if (value === null) return null;
  const object = value as object;
  if (seen.has(object)) return throwRefusal(path, "a circular reference");
  // `seen` holds the objects on the way down: its size is the depth. A bound, so a caller's legal JSON
  // nested 200,000 levels is refused by name instead of overflowing the stack (a 500 over HTTP).
  if (seen.size >= maxDepth) throw tooDeep(path);
  seen.add(object);
  try {
    return encodeObject(object, path, seen);
  } finally {
    seen.delete(object);
  }
}

function throwRefusal(path: string, what: string): never {
  throw refuse(path, what);
}

function encodeObject(object: object, path: string, seen: Set<object>): Encoded {
  if (Array.isArray(object)) {
    if (Object.getPrototypeOf(object) !== Array.prototype) return throwRefusal(path, "an array subclass");
    const items: Encoded[] = [];
    for (let index = 0; index < object.length; index++) {
      if (!(index in object)) return throwRefusal(`${path}[${index}]`, "a hole in a sparse array");
      items.push(encodeAt(object[index], `${path}[${index}]`, seen));
    }
    return items;
  }
  if (object instanceof Date) {
    const time = object.getTime();
    return { [tag]: "date", v: Number.isNaN(time) ? null : object.toISOString() };
  }
  if (object instanceof Map) {
    if (Object.getPrototypeOf(object) !== Map.prototype) return throwRefusal(path, "a Map subclass");
    return {
      [tag]: "map",
      v: [...object].map(([key, entry], index) => [
        encodeAt(key, `${path}.<key ${index}>`, seen),
        encodeAt(entry, `${path}.get(${describeKey(key)})`, seen),
      ]),
    };
  }
  if (object instanceof Set) {
    if (Object.getPrototypeOf(object) !== Set.prototype) return throwRefusal(path, "a Set subclass");
    return {
      [tag]: "set",
      v: [...object].map((entry, index) => encodeAt(entry, `${path}.<item ${index}>`, seen)),
    };
  }
  if (object instanceof Uint8Array && Object.getPrototypeOf(object) === Uint8Array.prototype) {
    return {
      [tag]: "bytes",
      v: Buffer.from(object.buffer, object.byteOffset, object.byteLength).toString("base64"),
    };
  }
  if (object instanceof Error) return encodeError(object, path, seen);
  const prototype = Object.getPrototypeOf(object);
  if (prototype !== Object.prototype && prototype !== null) {
    const name = (object as { constructor?: { name?: string } }).constructor?.name ?? "unknown class";
    return throwRefusal(path, `an instance of ${name}`);
  }
  if (Object.getOwnPropertySymbols(object).length > 0)
    return throwRefusal(path, "an object with symbol keys");
  // Built from entries, so a key "__proto__" (JSON.parse makes it an own key) stays a key: assigned,
  // it would set the prototype and vanish from the journal.
  const entries: { [key: string]: Encoded } = Object.fromEntries(
    Object.keys(object).map((key) => [
      key,
      encodeAt((object as Record<string, unknown>)[key], `${path}.${key}`, seen),
    ]),
  );
  // An object that itself has a "$t" key is wrapped, so no user data is mistaken for a tag.
  return Object.hasOwn(entries, tag) ? { [tag]: "object", v: entries } : entries;
}

/** A plain object's members decoded, every key an own key ("__proto__" too). */
function decodeEntries(value: Record<string, Encoded>, label: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, decodeAt(entry, label)]));
}

function encodeError(error: Error, path: string, seen: Set<object>): Encoded {
  const encoded: { [key: string]: Encoded } = { [tag]: "error", name: error.name, message: error.message };
  const coded = error as Error & { code?: unknown; retryable?: unknown; data?: unknown };
  if (typeof coded.code === "string") encoded.code = coded.code;
  if (typeof coded.retryable === "boolean") encoded.retryable = coded.retryable;
  if (coded.data !== undefined) encoded.data = encodeAt(coded.data, `${path}.data`, seen);
  return encoded;
}

function describeKey(key: unknown): string {
  return typeof key === "string" ? JSON.stringify(key) : typeof key;
}

function decodeAt(value: Encoded, label: string): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => decodeAt(item, label));
  const kind = value[tag];
  if (kind === undefined) {
    return decodeEntries(value, label);
  }
  const inner = value.v;
  switch (kind) {
    case "undefined":
      return undefined;
    case "number":
      return inner === "-0" ? -0 : Number(inner);
    case "bigint":
      if (typeof inner !== "string" || !/^-?\d+$/.test(inner))
        throw decodeFailure(label, "a bigint is malformed");
      return BigInt(inner);
    case "date":
      return new Date(inner === null ? Number.NaN : String(inner));
    case "map":
      if (!Array.isArray(inner)) throw decodeFailure(label, "a Map is malformed");
      return new Map(
        inner.map((pair) => {
          if (!Array.isArray(pair) || pair.length !== 2)
            throw decodeFailure(label, "a Map entry is malformed");
          return [decodeAt(pair[0] as Encoded, label), decodeAt(pair[1] as Encoded, label)];
        }),
      );
    case "set":
      if (!Array.isArray(inner)) throw decodeFailure(label, "a Set is malformed");
      return new Set(inner.map((item) => decodeAt(item, label)));
    case "bytes":
      if (typeof inner !== "string") throw decodeFailure(label, "bytes are malformed");
      return new Uint8Array(Buffer.from(inner, "base64"));
    case "object": {
      if (!isRecord(inner)) throw decodeFailure(label, "a wrapped object is malformed");
      return decodeEntries(inner as Record<string, Encoded>, label);
    }
    case "error":
      return decodeError(value, label);
    default:
      throw decodeFailure(label, `it carries the unknown tag ${JSON.stringify(kind)}`);
  }
}

function decodeError(value: { [key: string]: Encoded }, label: string): Error {
  const name = typeof value.name === "string" ? value.name : "Error";
  const message = typeof value.message === "string" ? value.message : "";
  const data = value.data === undefined ? undefined : decodeAt(value.data, label);
  // A coded error comes back as a ToolError (its class name kept), so `code` checks keep working.
  const error =
    typeof value.code === "string"
      ? new ToolError(value.code, message, {
          ...(typeof value.retryable === "boolean" ? { retryable: value.retryable } : {}),
          ...(data === undefined ? {} : { data }),
        })
      : Object.assign(new Error(message), data === undefined ? {} : { data });
  error.name = name;
  return error;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
