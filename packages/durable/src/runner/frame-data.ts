/** Frames travel as JSON: values a step may return are turned into their nearest JSON form. */
import { maxDepth, tooDeep } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";

/**
 * The value as a frame carries it. Throws `not_serializable` for a value nested deeper than the codec's
 * bound (counted as it is written, so a 100,000-deep value is refused before it reaches the stack's end)
 * or one JSON cannot write (a circular reference).
 */
export function toFrameData(value: unknown, label = "the frame's data"): unknown {
  if (value === undefined) return null;
  // The depth of each object written, by the holder it is written from: the root's holder is not in it.
  const depths = new Map<unknown, number>();
  function replacer(this: unknown, _key: string, raw: unknown): unknown {
    const written = replace(raw);
    if (typeof written === "object" && written !== null) {
      const depth = (depths.get(this) ?? 0) + 1;
      if (depth > maxDepth) throw tooDeep(label);
      depths.set(written, depth);
    }
    return written;
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value, replacer);
  } catch (error) {
    if (DurableError.isInstance(error)) throw error;
    throw new DurableError(
      "not_serializable",
      `Cannot send ${label} in a frame: ${(error as Error).message}; send plain data`,
      { data: { path: label } },
    );
  }
  return JSON.parse(text ?? "null");
}

function replace(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Map) return Object.fromEntries([...value].map(([key, entry]) => [String(key), entry]));
  if (value instanceof Set) return [...value];
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (value instanceof Error) {
    const coded = value as Error & { code?: unknown };
    return {
      name: value.name,
      message: value.message,
      ...(typeof coded.code === "string" ? { code: coded.code } : {}),
    };
  }
  return value;
}
