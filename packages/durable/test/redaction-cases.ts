/**
 * Random redaction cases for `redaction.property.test.ts`: a tool input whose every value at a redacted
 * path carries a unique secret marker, the policy's paths, and an oracle of the mask written apart from
 * `redact`.
 */
import { setOwn } from "@tackle/core/internal";
import type { seededRandom } from "@tackle/test-support";

type Random = ReturnType<typeof seededRandom>;

export const marker = "SECRET";
const mask = "[redacted]";

export type Outcome = "succeeds" | "fails" | "refused";

export interface RedactionCase {
  readonly seed: number;
  readonly input: Record<string, unknown>;
  readonly paths: string[];
  readonly approve: boolean;
  readonly outcome: Outcome;
}

/** Keys a caller may send: inherited names, dots, a star, an array's `length`, indices. */
function keyPool(withProto: boolean): string[] {
  const keys = ["a", "b", "card", "number", "items", "sku", "constructor", "toString", "x.y", "*"];
  keys.push("length", "0", "1", "valueOf", "p.q.r");
  if (withProto) keys.push("__proto__");
  return keys;
}

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function leaf(random: Random, counter: { n: number }): unknown {
  const roll = random();
  if (roll < 0.4) return `plain${counter.n++}`;
  if (roll < 0.6) return Math.floor(random() * 1000) - 500;
  if (roll < 0.8) return random() < 0.5;
  return null;
}

function tree(random: Random, keys: string[], depth: number, counter: { n: number }): unknown {
  const roll = random();
  if (depth <= 0 || roll < 0.3) return leaf(random, counter);
  if (roll < 0.55) {
    return Array.from({ length: Math.floor(random() * 4) }, () => tree(random, keys, depth - 1, counter));
  }
  const value: Record<string, unknown> = {};
  const count = 1 + Math.floor(random() * 4);
  for (let index = 0; index < count; index++) {
    setOwn(value, pick(random, keys), tree(random, keys, depth - 1, counter));
  }
  return value;
}

/** Every position in `value` (its keys from the root), the root's own excluded. */
function positions(value: unknown, at: string[] = [], out: string[][] = []): string[][] {
  if (typeof value !== "object" || value === null) return out;
  for (const key of Object.keys(value)) {
    out.push([...at, key]);
    positions((value as Record<string, unknown>)[key], [...at, key], out);
  }
  return out;
}

/** Whether `segments` (a path split on dots) spell exactly `keys`: `*` is any one key, a key may hold dots. */
function spells(keys: readonly string[], segments: readonly string[]): boolean {
  if (keys.length === 0) return segments.length === 0;
  if (segments.length === 0) return false;
  const [key, ...rest] = keys as [string, ...string[]];
  if (segments[0] === "*" && spells(rest, segments.slice(1))) return true;
  for (let end = 1; end <= segments.length; end++) {
    if (segments.slice(0, end).join(".") === key && spells(rest, segments.slice(end))) return true;
  }
  return false;
}

/** A position is masked when one of the paths spells it or one of its ancestors. */
export function isMasked(keys: readonly string[], paths: readonly string[]): boolean {
  for (let end = 1; end <= keys.length; end++) {
    const prefix = keys.slice(0, end);
    if (paths.some((path) => spells(prefix, path.split(".")))) return true;
  }
  return false;
}

/** The oracle's mask: every value at a masked position replaced whole, everything else as it was. */
export function expectedMask(value: unknown, paths: readonly string[], at: string[] = []): unknown {
  if (at.length > 0 && isMasked(at, paths)) return mask;
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value))
    return value.map((item, index) => expectedMask(item, paths, [...at, String(index)]));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) setOwn(out, key, expectedMask(item, paths, [...at, key]));
  return out;
}

/** Replaces each outermost masked value by one carrying unique markers (sometimes left a bare scalar). */
function plantSecrets(
  value: unknown,
  paths: readonly string[],
  seed: number,
  counter: { n: number },
  at: string[] = [],
): unknown {
  if (at.length > 0 && isMasked(at, paths)) {
    const scalar = typeof value !== "object" || value === null;
    if (scalar && typeof value !== "string" && counter.n % 4 === 0) {
      counter.n++;
      return value;
    }
    const secret = () => `${marker}${seed}x${counter.n++}`;
    const kind = counter.n % 3;
    if (kind === 0) return secret();
    if (kind === 1) return { s: secret(), n: 1, deep: [secret(), { t: secret() }] };
    return [secret(), [secret()], { x: secret() }];
  }
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    return value.map((item, index) => plantSecrets(item, paths, seed, counter, [...at, String(index)]));
  }
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    setOwn(out, key, plantSecrets(item, paths, seed, counter, [...at, key]));
  }
  return out;
}

/** A path to an existing position, some keys turned to `*`; or one to nowhere. */
function randomPath(random: Random, input: unknown, keys: string[]): string {
  const all = positions(input);
  if (all.length > 0 && random() < 0.75) {
    return pick(random, all)
      .map((key) => (random() < 0.25 ? "*" : key))
      .join(".");
  }
  return Array.from({ length: 1 + Math.floor(random() * 3) }, () =>
    random() < 0.15 ? "*" : random() < 0.5 ? pick(random, keys) : "missing",
  ).join(".");
}

/** One case: `withProto` lets `__proto__` be a key (the AI SDK's JSON parser refuses one). */
export function randomCase(random: Random, seed: number, withProto: boolean): RedactionCase {
  const keys = keyPool(withProto);
  const counter = { n: 0 };
  const raw: Record<string, unknown> = {};
  const count = 1 + Math.floor(random() * 4);
  for (let index = 0; index < count; index++) setOwn(raw, pick(random, keys), tree(random, keys, 4, counter));
  const paths = Array.from({ length: Math.floor(random() * 4) + (random() < 0.9 ? 1 : 0) }, () =>
    randomPath(random, raw, keys),
  );
  const input = plantSecrets(raw, paths, seed, { n: 0 }) as Record<string, unknown>;
  const roll = random();
  const approve = random() < 0.5;
  const outcome: Outcome = approve && roll < 0.3 ? "refused" : roll < 0.65 ? "succeeds" : "fails";
  return { seed, input, paths, approve, outcome };
}

/** Throws, naming the case, if a secret marker appears anywhere in what was read. */
export function assertNoMarker(seen: unknown, what: string, c: RedactionCase): void {
  const text = typeof seen === "string" ? seen : JSON.stringify(seen);
  const at = text.indexOf(marker);
  if (at !== -1) {
    throw new Error(
      `seed ${c.seed}: ${what} shows a redacted value near ${JSON.stringify(text.slice(Math.max(0, at - 120), at + 40))}` +
        `\ninput ${JSON.stringify(c.input)}\npaths ${JSON.stringify(c.paths)}`,
    );
  }
}
