/** Frames travel as JSON: values a step may return are turned into their nearest JSON form. */
export function toFrameData(value: unknown): unknown {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value, replacer) ?? "null");
}

function replacer(this: unknown, _key: string, value: unknown): unknown {
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
