/**
 * Random redaction cases for `redaction.property.test.ts`: a tool input whose every value at a redacted
 * path carries a unique secret marker, the policy's paths, and an oracle of the mask written apart from
 * `redact`.
 */
import { createHash } from "node:crypto";
import { setOwn } from "@tackle/core/internal";
import { encodeValue } from "@tackle/durable";
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
  /** The approver's edited arguments, when the approval is answered with edits; the tool runs with these. */
  readonly edit?: Record<string, unknown>;
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
  // Drawn last, so the cases without edits stay what they were.
  if (!approve || outcome === "refused" || random() < 0.5) return { seed, input, paths, approve, outcome };
  return { seed, input, paths, approve, outcome, edit: randomEdit(random, input, paths, keys, seed) };
}

/** The value at `keys` in `value` set to `item` (an own key, even `__proto__`). */
function setAt(value: unknown, keys: readonly string[], item: unknown): void {
  let parent = value as Record<string, unknown>;
  for (const key of keys.slice(0, -1)) parent = parent[key] as Record<string, unknown>;
  const last = keys.at(-1) as string;
  if (Array.isArray(parent)) parent[Number(last)] = item;
  else setOwn(parent, last, item);
}

/**
 * An approver's edit of `input`: a redacted value changed to a new secret, a key added (a secret when
 * its position is redacted), a shown scalar changed; at least one of them.
 */
function randomEdit(
  random: Random,
  input: Record<string, unknown>,
  paths: readonly string[],
  keys: string[],
  seed: number,
): Record<string, unknown> {
  const edit = expectedMask(input, []) as Record<string, unknown>;
  let n = 0;
  const secret = () => `${marker}${seed}e${n++}`;
  const kinds = [random() < 0.6, random() < 0.5, random() < 0.6];
  if (!kinds.some(Boolean)) kinds[Math.floor(random() * 3)] = true;
  if (kinds[0]) {
    const masked = positions(edit).filter((at) => isMasked(at, paths));
    if (masked.length > 0) setAt(edit, pick(random, masked), random() < 0.5 ? secret() : { s: [secret()] });
  }
  if (kinds[1]) {
    const objects = [[], ...positions(edit)].filter((at) => {
      const value = at.reduce<unknown>((item, key) => (item as Record<string, unknown>)[key], edit);
      return typeof value === "object" && value !== null && !Array.isArray(value);
    });
    const at = [...pick(random, objects), random() < 0.5 ? pick(random, keys) : `added${n}`];
    setAt(edit, at, isMasked(at, paths) ? secret() : `added${n++}`);
  }
  if (kinds[2]) {
    const shown = positions(edit).filter((at) => {
      const value = at.reduce<unknown>((item, key) => (item as Record<string, unknown>)[key], edit);
      return (typeof value !== "object" || value === null) && !isMasked(at, paths);
    });
    if (shown.length > 0) setAt(edit, pick(random, shown), `edited${n++}`);
  }
  return edit;
}

function sorted(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(sorted);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort())
    setOwn(out, key, sorted((value as Record<string, unknown>)[key]));
  return out;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * Unsalted hashes an edit must not show (their first 16 hex digits, as an interrupt id's fingerprint
 * would): of the edited arguments, key order aside, as the codec or JSON writes them, and of each secret.
 */
function printsOf(c: RedactionCase): readonly string[] {
  if (c.edit === undefined) return [];
  const secrets = JSON.stringify(c.edit).match(new RegExp(`${marker}[0-9a-z]+`, "g")) ?? [];
  // An edit with nothing hidden in it is shown whole: its hash tells nothing more.
  const hidden = JSON.stringify(expectedMask(c.edit, c.paths)) !== JSON.stringify(c.edit);
  const texts = hidden
    ? [encodeValue(sorted(c.edit)), JSON.stringify(sorted(c.edit)), JSON.stringify(c.edit)]
    : [];
  for (const secret of secrets) texts.push(secret, JSON.stringify(secret), encodeValue(secret));
  return texts.map((text) => sha256(text).slice(0, 16));
}

/** Throws, naming the case, if a secret marker or an edit's hash appears anywhere in what was read. */
export function assertNoMarker(seen: unknown, what: string, c: RedactionCase): void {
  const text = typeof seen === "string" ? seen : JSON.stringify(seen);
  const print = printsOf(c).find((item) => text.includes(item));
  if (print !== undefined) {
    throw new Error(
      `seed ${c.seed}: ${what} shows a hash of the edited arguments (${print})\nedit ${JSON.stringify(c.edit)}`,
    );
  }
  const at = text.indexOf(marker);
  if (at !== -1) {
    throw new Error(
      `seed ${c.seed}: ${what} shows a redacted value near ${JSON.stringify(text.slice(Math.max(0, at - 120), at + 40))}` +
        `\ninput ${JSON.stringify(c.input)}\npaths ${JSON.stringify(c.paths)}`,
    );
  }
}
